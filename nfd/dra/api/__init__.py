"""Generated stubs for kubelet's plugin-registration and DRA gRPC APIs (see the .proto files)."""
