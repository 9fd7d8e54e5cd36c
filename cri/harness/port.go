package harness

import (
	"net"
	"testing"
)

// FreePort returns a loopback TCP port that was free a moment ago (another
// process may take it before the caller binds it).
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
