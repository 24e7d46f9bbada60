package testcluster

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echo is a server that writes back each line it reads.
func echo(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					_, _ = c.Write([]byte(line))
				}
			}()
		}
	}()
	return l.Addr().String()
}

// roundTrip says whether a line sent on c comes back within a second.
func roundTrip(c net.Conn) bool {
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "ping\n"
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestAProxyForwardsCutsAndHoldsConnections(t *testing.T) {
	p, err := StartProxy(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dial(t, p.Addr)
	if !roundTrip(c) {
		t.Fatal("nothing forwarded")
	}
	p.Cut()
	if roundTrip(c) {
		t.Error("a connection open at Cut still works")
	}
	if !roundTrip(dial(t, p.Addr)) {
		t.Error("a connection made after Cut is not forwarded")
	}
	p.Blackhole()
	if roundTrip(dial(t, p.Addr)) {
		t.Error("a connection made during Blackhole is answered")
	}
	p.Restore()
	if !roundTrip(dial(t, p.Addr)) {
		t.Error("a connection made after Restore is not forwarded")
	}
}
