package sim_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/test/bufconn"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/sim"
)

// A runtime served on an in-memory listener and reached through
// cri.WithDialer answers inside a testing/synctest bubble; the client's
// errors name the endpoint given, and once the server stops the client
// fails as on a socket nobody listens on, and reconnects when it is
// served again.
func TestServeListenerInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lis atomic.Pointer[bufconn.Listener]
		lis.Store(bufconn.Listen(1 << 20))
		dial := func(ctx context.Context, _ string) (net.Conn, error) { return lis.Load().DialContext(ctx) }
		const endpoint = "unix:///nowhere/sim.sock"
		srv := sim.New(sim.Options{Images: []string{"busybox:latest"}}).ServeListener(lis.Load(), endpoint)
		rt, err := cri.Dial(context.Background(), endpoint, cri.WithDialer(dial))
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		if _, err := rt.Version(context.Background()); err != nil {
			t.Fatalf("Version: %v", err)
		}
		srv.Stop()
		_, err = rt.Version(context.Background())
		var ce *cri.Error
		if !errors.As(err, &ce) || ce.Class != cri.ClassUnavailable {
			t.Fatalf("Version on a stopped runtime = %v, want a ClassUnavailable *cri.Error", err)
		}
		if rt.Endpoint() != endpoint {
			t.Errorf("Endpoint = %q, want %q", rt.Endpoint(), endpoint)
		}
		lis.Store(bufconn.Listen(1 << 20))
		srv = srv.Runtime.ServeListener(lis.Load(), endpoint)
		defer srv.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), cri.DefaultTimeout)
		defer cancel()
		for {
			if _, err = rt.Version(ctx); err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(50 * time.Millisecond) // the bubble's time, for gRPC's reconnect backoff
		}
		if err != nil {
			t.Fatalf("Version after the runtime came back: %v", err)
		}
	})
}
