package cluster_test

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/speclet/speclet/test/cluster"
)

// TestHostAddr: the address is on the host end of the veth pair, a server
// on the address is reachable, and
// Remove leaves neither the link nor the namespace.
func TestHostAddr(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes a network namespace and a veth pair")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip (iproute2) missing; make deps installs it")
	}
	a, err := cluster.NewHostAddr("test")
	if err != nil {
		t.Fatal(err)
	}
	removed := false
	defer func() {
		if !removed {
			a.Remove()
		}
	}()
	ipa := net.ParseIP(a.IP)
	if ipa == nil || ipa.IsLoopback() || ipa.IsLinkLocalUnicast() {
		t.Fatalf("address %q: want a non-loopback, non-link-local IPv4 address", a.IP)
	}
	iface, err := net.InterfaceByName(a.Link)
	if err != nil {
		t.Fatal(err)
	}
	addrs, _ := iface.Addrs()
	found := false
	for _, ad := range addrs {
		found = found || strings.HasPrefix(ad.String(), a.IP+"/")
	}
	if !found {
		t.Fatalf("%s has %v, not %s", a.Link, addrs, a.IP)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(a.IP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Write([]byte("ok"))
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := c.Read(buf); err != nil || string(buf) != "ok" {
		t.Fatalf("read from %s: %q, %v", l.Addr(), buf, err)
	}
	c.Close()
	l.Close()
	if err := a.Remove(); err != nil {
		t.Fatal(err)
	}
	removed = true
	if _, err := net.InterfaceByName(a.Link); err == nil {
		t.Errorf("%s still exists after Remove", a.Link)
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), a.Netns) {
		t.Errorf("netns %s still exists after Remove", a.Netns)
	}
}
