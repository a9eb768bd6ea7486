package apiserver

import (
	"errors"
	"net"
	"testing"
)

func TestListenersServeEveryAddress(t *testing.T) {
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	first, second := listen(), listen()
	l := newListeners(first)
	l.add(second)
	if l.Addr().String() != first.Addr().String() {
		t.Errorf("Addr %s, want the first listener's %s", l.Addr(), first.Addr())
	}
	for _, ln := range []net.Listener{first, second} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if got.LocalAddr().String() != ln.Addr().String() {
			t.Errorf("accepted on %s, want %s", got.LocalAddr(), ln.Addr())
		}
		got.Close()
		c.Close()
	}
	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v", err)
	}
	if _, err := net.Dial("tcp", second.Addr().String()); err == nil {
		t.Error("the added listener still accepts after Close")
	}
	late := listen()
	l.add(late)
	if _, err := net.Dial("tcp", late.Addr().String()); err == nil {
		t.Error("a listener added after Close accepts")
	}
}
