// Command kubelet-client calls a device plugin's Allocate the way kubelet does: grpc-go
// over the plugin's unix socket, one call at a time. It prints each call's latency in
// nanoseconds as a JSON list, for bench/deviceplugin_bench.py to summarise.
//
// With -serve it is instead a reference plugin in Go that answers every call at once with
// a fixed response: the same client against it gives this machine's floor for a gRPC call.
//
// It needs no generated code: requests are encoded by hand (two nested length-delimited
// fields) and responses are taken as bytes, so only grpc-go itself is needed to build it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
)

// bytesCodec passes messages through as they are: the caller encodes requests itself.
type bytesCodec struct{}

func (bytesCodec) Marshal(v interface{}) ([]byte, error) { return *v.(*[]byte), nil }

func (bytesCodec) Unmarshal(data []byte, v interface{}) error {
	p := v.(*[]byte)
	*p = append((*p)[:0], data...)
	return nil
}

func (bytesCodec) Name() string { return "proto" }

func (bytesCodec) String() string { return "proto" } // grpc.CustomCodec's older interface

// serve answers every unary call on socket with AllocateResponse{[{envs: {A: B}}]}.
func serve(socket string) {
	os.Remove(socket)
	l, err := net.Listen("unix", socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet-client: %v\n", err)
		os.Exit(1)
	}
	resp := field(nil, field(nil, []byte{0x0a, 0x01, 'A', 0x12, 0x01, 'B'})) // container_responses[0].envs
	s := grpc.NewServer(grpc.CustomCodec(bytesCodec{}),
		grpc.UnknownServiceHandler(func(_ interface{}, stream grpc.ServerStream) error {
			var req []byte
			if err := stream.RecvMsg(&req); err != nil {
				return err
			}
			return stream.SendMsg(&resp)
		}))
	fmt.Println("serving")
	if err := s.Serve(l); err != nil {
		os.Exit(1)
	}
}

// field appends protobuf field 1 (wire type 2, length-delimited) holding b.
func field(dst, b []byte) []byte {
	dst = append(dst, 0x0a)
	n := uint64(len(b))
	for n >= 0x80 {
		dst = append(dst, byte(n)|0x80)
		n >>= 7
	}
	return append(append(dst, byte(n)), b...)
}

// allocateRequest encodes AllocateRequest{container_requests: [{devices_ids: ids}]}.
func allocateRequest(ids []string) []byte {
	var inner []byte
	for _, id := range ids {
		inner = field(inner, []byte(id))
	}
	return field(nil, inner)
}

func main() {
	socket := flag.String("socket", "", "the plugin's unix socket")
	devices := flag.String("devices", "", "comma-separated device IDs, one per call, in turn")
	calls := flag.Int("calls", 2000, "measured calls")
	warmup := flag.Int("warmup", 100, "calls before measuring")
	reference := flag.String("serve", "", "serve as the reference plugin on this socket instead")
	flag.Parse()
	if *reference != "" {
		serve(*reference)
		return
	}
	if *socket == "" || *devices == "" {
		fmt.Fprintln(os.Stderr, "kubelet-client: -socket and -devices are required")
		os.Exit(2)
	}
	ids := strings.Split(*devices, ",")
	reqs := make([][]byte, len(ids))
	for i, id := range ids {
		reqs[i] = allocateRequest([]string{id})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// As kubelet dials plugins: a unix-socket dialer, blocking until connected.
	conn, err := grpc.DialContext(ctx, *socket, grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet-client: cannot connect to %s: %v\n", *socket, err)
		os.Exit(1)
	}
	defer conn.Close()

	var resp []byte
	call := func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req := reqs[i%len(reqs)]
		return conn.Invoke(ctx, "/v1beta1.DevicePlugin/Allocate", &req, &resp, grpc.ForceCodec(bytesCodec{}))
	}
	for i := 0; i < *warmup; i++ {
		if err := call(i); err != nil {
			fmt.Fprintf(os.Stderr, "kubelet-client: Allocate failed: %v\n", err)
			os.Exit(1)
		}
	}
	lat := make([]int64, 0, *calls)
	for i := 0; i < *calls; i++ {
		t0 := time.Now()
		if err := call(i); err != nil {
			fmt.Fprintf(os.Stderr, "kubelet-client: Allocate failed: %v\n", err)
			os.Exit(1)
		}
		lat = append(lat, time.Since(t0).Nanoseconds())
		if len(resp) == 0 {
			fmt.Fprintln(os.Stderr, "kubelet-client: empty Allocate response")
			os.Exit(1)
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(lat); err != nil {
		os.Exit(1)
	}
}
