//! Regenerates the checked-in generated code:
//! - `src/channelz/generated/`: the prost messages and tonic client and
//!   server of `grpc.channelz.v1`, and the encoded file descriptor set
//!   (with its `google.protobuf` imports) that the reflection service
//!   serves;
//! - `src/binlog/generated/`: the prost messages of `grpc.binarylog.v1`
//!   (no service), their `bytes` fields as `bytes::Bytes` so that logged
//!   messages are shared, not copied.
fn main() {
    let protoc = protoc_bin_vendored::protoc_bin_path().expect("vendored protoc");
    let include = protoc_bin_vendored::include_path().expect("vendored protoc includes");
    let include = include.to_str().expect("UTF-8 include path");
    // SAFETY: single-threaded at this point; nothing else reads the environment.
    unsafe { std::env::set_var("PROTOC", protoc) };

    let out = "../../src/channelz/generated";
    tonic_prost_build::configure()
        .out_dir(out)
        .file_descriptor_set_path(format!("{out}/channelz_descriptor.bin"))
        .emit_rerun_if_changed(false)
        .compile_protos(
            &["../../proto/grpc/channelz/v1/channelz.proto"],
            &["../../proto", include],
        )
        .expect("generate grpc.channelz.v1");

    tonic_prost_build::configure()
        .out_dir("../../src/binlog/generated")
        .build_client(false)
        .build_server(false)
        .bytes(".grpc.binarylog.v1")
        .emit_rerun_if_changed(false)
        .compile_protos(
            &["../../proto/grpc/binlog/v1/binarylog.proto"],
            &["../../proto", include],
        )
        .expect("generate grpc.binarylog.v1");
}
