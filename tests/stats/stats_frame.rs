//! The incremental frame decoder against random streams and every split.

use proptest::prelude::*;
use tonic_hotpath::stats::frame::{FrameDecoder, FrameError, FrameHeader};

fn encode(messages: &[(bool, Vec<u8>)]) -> Vec<u8> {
    let mut wire = Vec::new();
    for (compressed, body) in messages {
        wire.push(u8::from(*compressed));
        wire.extend_from_slice(&(body.len() as u32).to_be_bytes());
        wire.extend_from_slice(body);
    }
    wire
}

fn headers(messages: &[(bool, Vec<u8>)]) -> Vec<FrameHeader> {
    messages
        .iter()
        .map(|(compressed, body)| FrameHeader {
            compressed: *compressed,
            length: body.len() as u32,
        })
        .collect()
}

fn decode_chunks<'a>(
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<FrameHeader>, FrameError> {
    let mut decoder = FrameDecoder::new();
    let mut seen = Vec::new();
    for chunk in chunks {
        decoder.push(chunk, |header| seen.push(header))?;
    }
    decoder.finish()?;
    Ok(seen)
}

fn message() -> impl Strategy<Value = (bool, Vec<u8>)> {
    (any::<bool>(), proptest::collection::vec(any::<u8>(), 0..40))
}

proptest! {
    #[test]
    fn every_two_and_three_way_split_yields_the_same_messages(
        messages in proptest::collection::vec(message(), 0..6),
    ) {
        let wire = encode(&messages);
        let expected = headers(&messages);
        prop_assert_eq!(decode_chunks([&wire[..]]).unwrap(), expected.clone());
        for i in 0..=wire.len() {
            let (a, b) = wire.split_at(i);
            prop_assert_eq!(decode_chunks([a, b]).unwrap(), expected.clone());
        }
        for i in (0..=wire.len()).step_by(3) {
            for j in i..=wire.len() {
                let parts = [&wire[..i], &wire[i..j], &wire[j..]];
                prop_assert_eq!(decode_chunks(parts).unwrap(), expected.clone());
            }
        }
    }

    #[test]
    fn random_chunking_yields_the_same_messages(
        messages in proptest::collection::vec(message(), 0..12),
        cuts in proptest::collection::vec(any::<usize>(), 0..20),
    ) {
        let wire = encode(&messages);
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (wire.len() + 1)).collect();
        points.push(0);
        points.push(wire.len());
        points.sort_unstable();
        let chunks: Vec<&[u8]> = points.windows(2).map(|w| &wire[w[0]..w[1]]).collect();
        prop_assert_eq!(decode_chunks(chunks).unwrap(), headers(&messages));
    }

    #[test]
    fn byte_at_a_time_matches(messages in proptest::collection::vec(message(), 0..8)) {
        let wire = encode(&messages);
        prop_assert_eq!(decode_chunks(wire.chunks(1)).unwrap(), headers(&messages));
    }

    #[test]
    fn any_truncation_is_an_error(
        messages in proptest::collection::vec(message(), 1..5),
        cut in any::<usize>(),
    ) {
        let wire = encode(&messages);
        // Message boundaries are the only cut points that are not truncations.
        let mut boundaries = vec![0usize];
        for (_, body) in &messages {
            boundaries.push(boundaries.last().unwrap() + 5 + body.len());
        }
        let cut = cut % wire.len();
        let result = decode_chunks([&wire[..cut]]);
        if boundaries.contains(&cut) {
            prop_assert!(result.is_ok());
        } else {
            let is_truncated = matches!(result, Err(FrameError::Truncated { .. }));
            prop_assert!(is_truncated);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode_chunks(bytes.chunks(7));
    }
}

#[test]
fn bad_flag_is_an_error_and_sticks() {
    let mut decoder = FrameDecoder::new();
    let error = decoder.push(&[2, 0, 0, 0, 0], |_| {}).unwrap_err();
    assert_eq!(error, FrameError::BadFlag(2));
    assert_eq!(decoder.push(&[0, 0, 0, 0, 0], |_| {}), Err(error.clone()));
    assert_eq!(decoder.finish(), Err(error));
    assert_eq!(
        FrameError::BadFlag(2).to_string(),
        "grpc frame: compressed flag is 2, expected 0 or 1"
    );
}

#[test]
fn length_over_limit_is_an_error() {
    let mut decoder = FrameDecoder::with_max_message_len(10);
    let mut seen = Vec::new();
    decoder.push(&[0, 0, 0, 0, 10], |h| seen.push(h)).unwrap();
    decoder.push(&[0; 10], |h| seen.push(h)).unwrap();
    let error = decoder
        .push(&[1, 0, 0, 0, 11], |h| seen.push(h))
        .unwrap_err();
    assert_eq!(
        error,
        FrameError::TooLong {
            length: 11,
            limit: 10
        }
    );
    assert_eq!(seen.len(), 1);
    assert!(error.to_string().contains("exceeds the limit of 10 bytes"));
}

#[test]
fn a_message_is_reported_once_its_last_byte_arrives() {
    let mut decoder = FrameDecoder::new();
    let mut seen = Vec::new();
    decoder
        .push(&[0, 0, 0, 0, 3, b'a'], |h| seen.push(h))
        .unwrap();
    decoder.push(b"b", |h| seen.push(h)).unwrap();
    assert!(seen.is_empty(), "prefix and part of the message only");
    decoder.push(b"c", |h| seen.push(h)).unwrap();
    let abc = FrameHeader {
        compressed: false,
        length: 3,
    };
    assert_eq!(seen, [abc]);
    // An empty message is whole once its prefix is.
    decoder
        .push(&[0, 0, 0, 0, 0, 0, 0], |h| seen.push(h))
        .unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].length, 0);
}

#[test]
fn truncation_reports_missing_bytes() {
    let mut decoder = FrameDecoder::new();
    decoder.push(&[0, 0, 0], |_| {}).unwrap();
    assert_eq!(decoder.finish(), Err(FrameError::Truncated { missing: 2 }));
    decoder.push(&[0, 4, 1], |_| {}).unwrap();
    assert_eq!(decoder.finish(), Err(FrameError::Truncated { missing: 3 }));
    assert!(!decoder.is_idle());
    decoder.push(&[1, 1, 1], |_| {}).unwrap();
    assert!(decoder.is_idle());
    assert_eq!(decoder.finish(), Ok(()));
}

#[test]
fn max_length_u32_does_not_overflow() {
    let mut decoder = FrameDecoder::with_max_message_len(u32::MAX);
    let mut seen = Vec::new();
    decoder
        .push(&[1, 0xff, 0xff, 0xff, 0xff, 9, 9], |h| seen.push(h))
        .unwrap();
    // The message has not arrived: no event for it (a peer cannot inflate
    // byte counts with a prefix it never fills).
    assert!(seen.is_empty());
    let header = FrameHeader {
        compressed: true,
        length: u32::MAX,
    };
    assert_eq!(header.wire_length(), u64::from(u32::MAX) + 5);
    assert_eq!(
        decoder.finish(),
        Err(FrameError::Truncated {
            missing: u64::from(u32::MAX) - 2
        })
    );
}
