// Package nettest holds what the runtime packages' tests use to reach programs in pods, as
// net/http/httptest does for HTTP: it is imported by tests only.
package nettest

import (
	"bufio"
	"net"
	"strings"
	"time"
)

// timeout bounds both the connection and the read of ReadLine.
const timeout = 5 * time.Second

// ReadLine connects to the TCP address addr and returns the first line the other side sends, without
// its line end.
func ReadLine(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}
