package chaos

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// rawCodec passes gRPC messages through as bytes, so the proxy forwards any
// method of the runtime and image services without knowing its types.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: marshal %T", v)
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: unmarshal into %T", v)
	}
	*b = append((*b)[:0], data...)
	return nil
}

// Name is "proto" so that the content type on the wire stays the CRI's.
func (rawCodec) Name() string { return "proto" }

// Fault kinds the proxy injects.
const (
	faultBefore = "fail before forwarding" // the runtime never sees the call
	faultAfter  = "fail after forwarding"  // the call took effect, its reply is lost
	faultDelay  = "delay past the timeout" // the caller's deadline runs out first
)

// faultProxy serves a unix socket that forwards every CRI call to the
// runtime's socket and, while enabled, fails or delays calls at random
// (seeded): before forwarding, after forwarding (the reply replaced by
// Unavailable), or held until the caller's deadline.
type faultProxy struct {
	Socket  string
	backend *grpc.ClientConn
	srv     *grpc.Server

	pBefore, pAfter, pDelay float64
	delay                   time.Duration

	enabled atomic.Bool
	mu      sync.Mutex
	rng     *rand.Rand
	faults  map[string]int // "kind method" -> count
	calls   atomic.Int64
}

func startProxy(socket, backend string, seed uint64, pBefore, pAfter, pDelay float64, delay time.Duration) (*faultProxy, error) {
	conn, err := grpc.NewClient(backend, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20), grpc.MaxCallSendMsgSize(16<<20)))
	if err != nil {
		return nil, err
	}
	os.Remove(socket)
	l, err := net.Listen("unix", socket)
	if err != nil {
		conn.Close()
		return nil, err
	}
	p := &faultProxy{Socket: socket, backend: conn, pBefore: pBefore, pAfter: pAfter, pDelay: pDelay, delay: delay,
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), faults: map[string]int{}}
	p.srv = grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(p.forward),
		grpc.MaxRecvMsgSize(16<<20), grpc.MaxSendMsgSize(16<<20))
	go p.srv.Serve(l)
	return p, nil
}

func (p *faultProxy) Stop() {
	p.srv.Stop()
	p.backend.Close()
}

// pick decides the fault of one call of method ("" for none).
func (p *faultProxy) pick(method string) string {
	if !p.enabled.Load() || strings.HasSuffix(method, "/GetContainerEvents") {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.rng.Float64()
	kind := ""
	switch {
	case r < p.pBefore:
		kind = faultBefore
	case r < p.pBefore+p.pAfter:
		kind = faultAfter
	case r < p.pBefore+p.pAfter+p.pDelay:
		kind = faultDelay
	default:
		return ""
	}
	p.faults[kind+" "+method[strings.LastIndexByte(method, '/')+1:]]++
	return kind
}

// forward relays one unary or server-streaming call.
func (p *faultProxy) forward(_ any, in grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(in)
	if !ok {
		return status.Error(codes.Internal, "chaos proxy: no method")
	}
	p.calls.Add(1)
	var req []byte
	if err := in.RecvMsg(&req); err != nil {
		return err
	}
	fault := p.pick(method)
	ctx := in.Context()
	switch fault {
	case faultBefore:
		return status.Errorf(codes.Unavailable, "chaos: injected failure of %s", method)
	case faultDelay:
		select {
		case <-time.After(p.delay):
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	out, err := p.backend.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	if err := out.SendMsg(&req); err != nil {
		if errors.Is(err, io.EOF) {
			return out.RecvMsg(new([]byte)) // the real error
		}
		return err
	}
	if err := out.CloseSend(); err != nil {
		return err
	}
	for {
		var resp []byte
		err := out.RecvMsg(&resp)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if fault == faultAfter {
			return status.Errorf(codes.Unavailable, "chaos: injected failure of %s after it ran", method)
		}
		if err := in.SendMsg(&resp); err != nil {
			return err
		}
	}
	if fault == faultAfter {
		return status.Errorf(codes.Unavailable, "chaos: injected failure of %s after it ran", method)
	}
	return nil
}

// Faults returns the faults injected so far, "kind method" -> count, and
// their total.
func (p *faultProxy) Faults() (map[string]int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	n := 0
	for k, v := range p.faults {
		out[k] = v
		n += v
	}
	return out, n
}

func formatFaults(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "    %-60s %d\n", k, m[k])
	}
	return b.String()
}
