package testcluster

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Proxy forwards TCP connections on a loopback port to the API server
// (or any address), so that a test can cut one client off from it while
// others go on: Blackhole holds every connection open and forwards
// nothing, as a network partition does (requests hang until their own
// timeout); Cut closes the connections open now, as an API server restart
// or a load balancer in between does; Restore forwards again. TLS goes
// through untouched, so the client's kubeconfig only changes its server.
type Proxy struct {
	// Addr is the proxy's host:port.
	Addr string

	target   string
	listener net.Listener
	mu       sync.Mutex
	conns    map[net.Conn]bool
	holes    bool
	wg       sync.WaitGroup
}

// StartProxy forwards a new loopback port to target (host:port).
func StartProxy(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: l.Addr().String(), target: target, listener: l, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.listener.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns[c] = true
		holes := p.holes
		p.mu.Unlock()
		if holes {
			// Held open, never answered, until Restore or Close.
			continue
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

func (p *Proxy) forward(c net.Conn) {
	defer p.wg.Done()
	defer p.drop(c)
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.conns[up] = true
	p.mu.Unlock()
	defer p.drop(up)
	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go copyHalf(up, c)
	go copyHalf(c, up)
	<-done
}

func (p *Proxy) drop(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Cut closes every connection open now; new ones are forwarded.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Blackhole closes the connections open now and holds every new one open
// without forwarding anything, until Restore.
func (p *Proxy) Blackhole() {
	p.Cut()
	p.mu.Lock()
	p.holes = true
	p.mu.Unlock()
}

// Restore forwards new connections again; those held are closed.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.holes = false
	p.mu.Unlock()
	p.Cut()
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	err := p.listener.Close()
	p.Cut()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
