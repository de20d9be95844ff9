"""The generated API messages and stubs (streamstats_pb2, streamstats_pb2_grpc), built from
proto/streamstats/v1/streamstats.proto when the package is built."""
