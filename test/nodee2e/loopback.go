package nodee2e

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
)

// loopbackForward listens on 127.0.0.1:port and copies every connection
// to and from target, until stop. The suite reads some of the node's
// ports at localhost (ContainerMetrics: localhost:10255/metrics/cadvisor,
// e2e_node's nodeNameOrIP), where an upstream node e2e job's kubelet
// listens with its address 0.0.0.0; the node here serves on the veth
// address alone, so the run forwards loopback's port to it, the same for
// both agents. stop closes the listener and every open connection and
// waits for the copies to end.
func loopbackForward(port int, target string) (stop func(), err error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("forward %s to %s: %w (another kubelet?)", addr, target, err)
	}
	var (
		mu     sync.Mutex
		conns  = map[net.Conn]bool{} // open on both ends, until stop
		closed bool
		wg     sync.WaitGroup
	)
	// add records a connection pair; false once stop has run.
	add := func(cs ...net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cs {
			conns[c] = true
		}
		return !closed
	}
	drop := func(cs ...net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cs {
			delete(conns, c)
			c.Close()
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			if !add(in, out) {
				drop(in, out)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				done := make(chan struct{})
				go func() { io.Copy(out, in); out.(*net.TCPConn).CloseWrite(); close(done) }()
				io.Copy(in, out)
				in.(*net.TCPConn).CloseWrite()
				<-done
				drop(in, out)
			}()
		}
	}()
	return func() {
		l.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}, nil
}
