//! Regenerates the checked-in generated code:
//! - `src/channelz/generated/`: the prost messages and tonic client and
//!   server of `grpc.channelz.v1`, and the encoded file descriptor set
//!   (with its `google.protobuf` imports) that the reflection service
//!   serves;
//! - `src/binlog/generated/`: the prost messages of `grpc.binarylog.v1`
//!   (no service), their `bytes` fields as `bytes::Bytes` so that logged
//!   messages are shared, not copied;
//! - `src/orca/generated/`: the prost messages of `xds.data.orca.v3`
//!   (`OrcaLoadReport`, its maps as `BTreeMap`s: one report always encodes
//!   to the same bytes) and `xds.service.orca.v3` with the tonic client and
//!   server of `OpenRcaService`;
//! - `tests/support/src/orca/generated/`: gRPC's interop `grpc.testing`
//!   messages and services (test-only: the tonic `TestService` the grpc-go
//!   interop client's ORCA cases run against).
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

    tonic_prost_build::configure()
        .out_dir("../../src/orca/generated")
        .btree_map(".xds.data.orca.v3")
        .emit_rerun_if_changed(false)
        .compile_protos(
            &["../../proto/xds/service/orca/v3/orca.proto"],
            &["../../proto", include],
        )
        .expect("generate xds.service.orca.v3");

    tonic_prost_build::configure()
        .out_dir("../../tests/support/src/orca/generated")
        .btree_map(".xds.data.orca.v3")
        .extern_path(".xds", "::tonic_hotpath::orca::proto::xds")
        .emit_rerun_if_changed(false)
        .compile_protos(
            &["../../proto/grpc/testing/test.proto"],
            &["../../proto", include],
        )
        .expect("generate grpc.testing");
}
