package cluster

import (
	"crypto/rand"
	"fmt"
	"net"
	"os/exec"
	"strings"
)

// HostAddr is a non-loopback address of this machine that kube-apiserver
// accepts where it refuses loopback and link-local ones (a node's address
// for its node proxy: "address not allowed"; an Endpoints or EndpointSlice
// address for an aggregated API server): the host end of a veth pair whose
// other end lives in a network namespace of its own, a /30 of
// 10.254.0.0/16 between them. Nothing but the two ends is on the link, so
// traffic to the address stays on this machine.
type HostAddr struct {
	// IP is the host end's address, where the agent serves its API.
	IP string
	// Peer is the namespace end's address.
	Peer string
	// Link is the host end's interface, Netns the namespace.
	Link, Netns string
}

// NewHostAddr makes the namespace, the veth pair and the addresses; Remove
// undoes it all. tag (at most 5 characters) names them: the host end is
// s<tag><id>, the namespace end s<tag>p<id>, the namespace
// speclet-<tag>-<id>, with a random 4-hex-digit id.
func NewHostAddr(tag string) (*HostAddr, error) {
	if len(tag) == 0 || len(tag) > 5 {
		return nil, fmt.Errorf("host address: tag %q: want 1 to 5 characters", tag)
	}
	rnd := make([]byte, 4)
	if _, err := rand.Read(rnd); err != nil {
		return nil, err
	}
	used := map[string]bool{}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				used[ipn.IP.Mask(net.CIDRMask(30, 32)).String()] = true
			}
		}
	}
	var base net.IP
	for i := 0; i < 64; i++ {
		b := net.IPv4(10, 254, rnd[0]+byte(i), rnd[1]&0xfc)
		if !used[b.String()] {
			base = b.To4()
			break
		}
	}
	if base == nil {
		return nil, fmt.Errorf("host address: no free /30 in 10.254.0.0/16")
	}
	id := fmt.Sprintf("%02x%02x", rnd[2], rnd[3])
	peer := "s" + tag + "p" + id
	a := &HostAddr{
		IP:    net.IPv4(base[0], base[1], base[2], base[3]+1).String(),
		Peer:  net.IPv4(base[0], base[1], base[2], base[3]+2).String(),
		Link:  "s" + tag + id,
		Netns: "speclet-" + tag + "-" + id,
	}
	steps := [][]string{
		{"netns", "add", a.Netns},
		{"link", "add", a.Link, "type", "veth", "peer", "name", peer, "netns", a.Netns},
		{"addr", "add", a.IP + "/30", "dev", a.Link},
		{"link", "set", a.Link, "up"},
		{"-n", a.Netns, "addr", "add", a.Peer + "/30", "dev", peer},
		{"-n", a.Netns, "link", "set", peer, "up"},
		{"-n", a.Netns, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			a.Remove()
			return nil, fmt.Errorf("host address: %w", err)
		}
	}
	return a, nil
}

// Remove deletes the veth pair and the namespace (each if present).
func (a *HostAddr) Remove() error {
	var errs []string
	if _, err := net.InterfaceByName(a.Link); err == nil {
		if err := ip("link", "del", a.Link); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), a.Netns) {
		if err := ip("netns", "del", a.Netns); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove host address %s: %s", a.IP, strings.Join(errs, "; "))
	}
	return nil
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
