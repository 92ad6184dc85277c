package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"time"

	binlogpb "google.golang.org/grpc/binarylog/grpc_binarylog_v1"
	"google.golang.org/protobuf/proto"
)

// fileSink is a binarylog.Sink writing grpc-go's framing (a 4-byte
// big-endian length, then the serialized GrpcLogEntry) to a file, as
// grpc-go's own (internal) buffered sink does. It also remembers which
// client calls have logged their final entry (SERVER_TRAILER or CANCEL), so
// the script can wait for that before starting the next call.
type fileSink struct {
	mu     sync.Mutex
	cond   *sync.Cond
	f      *os.File
	w      *bufio.Writer
	err    error
	closed bool

	clientCalls []uint64        // call ids of the client CLIENT_HEADERs, in order
	finished    map[uint64]bool // client call ids with a final entry
}

func newFileSink(path string) (*fileSink, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	s := &fileSink{f: f, w: bufio.NewWriter(f), finished: map[uint64]bool{}}
	s.cond = sync.NewCond(&s.mu)
	return s, nil
}

func (s *fileSink) Write(e *binlogpb.GrpcLogEntry) error {
	b, err := proto.Marshal(e)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("binlog sink: write after close")
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	if _, err := s.w.Write(hdr[:]); err != nil && s.err == nil {
		s.err = err
	}
	if _, err := s.w.Write(b); err != nil && s.err == nil {
		s.err = err
	}
	if e.GetLogger() == binlogpb.GrpcLogEntry_LOGGER_CLIENT {
		switch e.GetType() {
		case binlogpb.GrpcLogEntry_EVENT_TYPE_CLIENT_HEADER:
			s.clientCalls = append(s.clientCalls, e.GetCallId())
		case binlogpb.GrpcLogEntry_EVENT_TYPE_SERVER_TRAILER, binlogpb.GrpcLogEntry_EVENT_TYPE_CANCEL:
			s.finished[e.GetCallId()] = true
			s.cond.Broadcast()
		}
	}
	return s.err
}

// clientCallCount is how many client calls have logged their CLIENT_HEADER.
func (s *fileSink) clientCallCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clientCalls)
}

// waitClientFinal waits (up to timeout) until the client call that logged
// the CLIENT_HEADER number n (0-based) has logged its final entry; it
// returns at once when that call was not logged at all.
func (s *fileSink) waitClientFinal(n int, timeout time.Duration) error {
	timer := time.AfterFunc(timeout, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(timeout)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.clientCalls) <= n {
		return nil
	}
	id := s.clientCalls[n]
	for !s.finished[id] {
		if time.Now().After(deadline) {
			return errors.New("timed out waiting for the client's final log entry")
		}
		s.cond.Wait()
	}
	return nil
}

// Close flushes and closes the file; later writes fail.
func (s *fileSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.err
	}
	s.closed = true
	if err := s.w.Flush(); err != nil && s.err == nil {
		s.err = err
	}
	if err := s.f.Close(); err != nil && s.err == nil {
		s.err = err
	}
	return s.err
}
