// Package nettest holds what the runtime packages' tests use to reach programs in pods, as
// net/http/httptest does for HTTP: it is imported by tests only.
package nettest

import (
	"bufio"
	"context"
	"net"
	"strings"
	"time"
)

// timeout bounds both the connection and the read of ReadLine.
const timeout = 5 * time.Second

// DialFunc connects to an address, as network.Manager.DialContext reaches pods from the node namespace.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// ReadLine connects to the TCP address addr through dial and returns the first line the other side
// sends, without its line end.
func ReadLine(dial DialFunc, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}
