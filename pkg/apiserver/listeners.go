package apiserver

import (
	"errors"
	"net"
	"sync"
)

// listeners is one net.Listener over several: the server serves the connections of each, with the same
// TLS and authentication. The first is the server's own address; more are added while it runs (the pod
// bridge's, once rayctl knows pods have one).
type listeners struct {
	first  net.Listener
	conns  chan net.Conn
	errs   chan error
	closed chan struct{}
	once   sync.Once
	mu     sync.Mutex
	more   []net.Listener
}

func newListeners(first net.Listener) *listeners {
	l := &listeners{first: first, conns: make(chan net.Conn), errs: make(chan error, 1), closed: make(chan struct{})}
	go l.accept(first, true)
	return l
}

// add serves ln too, until the server closes its listener.
func (l *listeners) add(ln net.Listener) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.closed:
		ln.Close()
		return
	default:
	}
	l.more = append(l.more, ln)
	go l.accept(ln, false)
}

// accept hands ln's connections to Accept. An error of the first listener ends Accept with it; another
// listener's error ends only that listener.
func (l *listeners) accept(ln net.Listener, first bool) {
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if first {
				select {
				case l.errs <- err:
				default:
				}
			}
			return
		}
		select {
		case l.conns <- c:
		case <-l.closed:
			c.Close()
			return
		}
	}
}

// Accept returns the next connection of any listener.
func (l *listeners) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case err := <-l.errs:
		return nil, err
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close closes every listener.
func (l *listeners) Close() error {
	l.once.Do(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		close(l.closed)
		for _, ln := range l.more {
			ln.Close()
		}
	})
	return l.first.Close()
}

// Addr is the first listener's address.
func (l *listeners) Addr() net.Addr { return l.first.Addr() }
