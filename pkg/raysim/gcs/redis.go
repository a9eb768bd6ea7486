package gcs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Redis is the external Redis a head's GCS is pointed at for fault tolerance (Ray's RAY_REDIS_ADDRESS,
// REDIS_USERNAME, REDIS_PASSWORD and RAY_external_storage_namespace). A raysim head only checks that it
// answers and keeps the GCS's state in memory, not there; KubeRay's cleanup Job deletes the namespace's
// keys from it (DeleteNamespace).
type Redis struct {
	// Address is host:port, optionally with a redis:// prefix; of a comma-separated list the first.
	Address string
	// Username and Password, when Password is set, are sent with AUTH.
	Username, Password string
	// Namespace is the storage namespace Ray would keep this cluster's keys under.
	Namespace string
}

// RedisFromEnv reads the head's Redis from its environment; ok is false when RAY_REDIS_ADDRESS is unset.
func RedisFromEnv(getenv func(string) string) (r Redis, ok bool) {
	r = Redis{Address: getenv("RAY_REDIS_ADDRESS"), Username: getenv("REDIS_USERNAME"),
		Password: getenv("REDIS_PASSWORD"), Namespace: getenv("RAY_external_storage_namespace")}
	return r, strings.TrimSpace(r.Address) != ""
}

// hostPort is the address to dial, and credentials written into a redis:// URL where the environment
// gave none.
func (r Redis) hostPort() (addr, user, password string, err error) {
	addr, user, password = strings.TrimSpace(strings.Split(r.Address, ",")[0]), r.Username, r.Password
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil {
			return "", "", "", fmt.Errorf("redis address %q: %w", r.Address, err)
		}
		if u.Scheme != "redis" {
			return "", "", "", fmt.Errorf("redis address %q: raysim speaks plain redis://, not %s://", r.Address, u.Scheme)
		}
		if u.User != nil && password == "" {
			user = u.User.Username()
			password, _ = u.User.Password()
		}
		addr = u.Host
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", "", "", fmt.Errorf("redis address %q: %w", r.Address, err)
	}
	return addr, user, password, nil
}

// conn is a connection to the Redis, authenticated when a password is set.
type conn struct {
	net.Conn
	rd *bufio.Reader
}

// dial connects to the Redis within ctx (3 s at most) and authenticates when a password is set.
func (r Redis) dial(ctx context.Context) (*conn, error) {
	addr, user, password, err := r.hostPort()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &conn{Conn: nc, rd: bufio.NewReader(nc)}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	if password != "" {
		args := []string{"AUTH", password}
		if user != "" {
			args = []string{"AUTH", user, password}
		}
		if err := c.expect("+OK", args...); err != nil {
			nc.Close()
			return nil, fmt.Errorf("AUTH: %w", err)
		}
	}
	return c, nil
}

// Ping connects to the Redis, authenticates when a password is set, and sends PING, expecting PONG.
func (r Redis) Ping(ctx context.Context) error {
	c, err := r.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.expect("+PONG", "PING"); err != nil {
		return fmt.Errorf("PING: %w", err)
	}
	return nil
}

// send writes one RESP command (an array of bulk strings).
func (c *conn) send(args ...string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	_, err := c.Write([]byte(b.String()))
	return err
}

// expect sends a command and reads a one-line reply, which must be want.
func (c *conn) expect(want string, args ...string) error {
	if err := c.send(args...); err != nil {
		return err
	}
	line, err := c.rd.ReadString('\n')
	if err != nil {
		return fmt.Errorf("no answer: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line != want {
		return fmt.Errorf("redis answered %q", line)
	}
	return nil
}

// call sends a command and reads its reply: a string (simple or bulk; "" for nil), an int64, a []any,
// or an error for Redis's error replies.
func (c *conn) call(args ...string) (any, error) {
	if err := c.send(args...); err != nil {
		return nil, err
	}
	return readReply(c.rd)
}

// readReply reads one RESP reply.
func readReply(rd *bufio.Reader) (any, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("no answer: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, errors.New("an empty reply line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, fmt.Errorf("redis answered %q", line)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("a malformed array header %q", line)
		}
		out := make([]any, 0, max(n, 0))
		for range max(n, 0) {
			v, err := readReply(rd)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("an unknown reply %q", line)
}

// KeyPrefix is where Ray's GCS keeps a storage namespace's tables in Redis: RAY<namespace>@<table>.
func KeyPrefix(namespace string) string { return "RAY" + namespace + "@" }

// matchPattern is a SCAN pattern for the keys starting with prefix, its glob characters escaped.
func matchPattern(prefix string) string {
	var b strings.Builder
	for _, r := range prefix {
		if strings.ContainsRune(`[]-?*^\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String() + "*"
}

// DeleteNamespace deletes the keys of the Redis's storage namespace (those Ray's GCS would keep there,
// KeyPrefix(r.Namespace)…), as Ray's cleanup does: SCAN for them, then DEL each. It connects up to tries
// times, wait apart, logging each failure, before it gives up. It returns how many keys it deleted.
func (r Redis) DeleteNamespace(ctx context.Context, tries int, wait time.Duration, logf func(string, ...any)) (int, error) {
	if r.Namespace == "" {
		return 0, errors.New("no storage namespace (RAY_external_storage_namespace) to delete")
	}
	var c *conn
	var err error
	for i := 1; ; i++ {
		if c, err = r.dial(ctx); err == nil {
			break
		}
		if i >= max(tries, 1) {
			return 0, fmt.Errorf("could not connect to Redis at %s in %d attempts: %w", r.Address, i, err)
		}
		logf("cannot reach Redis at %s (%v); attempt %d of %d, retrying in %s", r.Address, err, i, tries, wait)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(wait):
		}
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	var keys []string
	for cursor := "0"; ; {
		reply, err := c.call("SCAN", cursor, "MATCH", matchPattern(KeyPrefix(r.Namespace)))
		if err != nil {
			return 0, fmt.Errorf("SCAN: %w", err)
		}
		page, ok := reply.([]any)
		if !ok || len(page) != 2 {
			return 0, fmt.Errorf("SCAN: an unexpected reply %v", reply)
		}
		next, _ := page[0].(string)
		found, _ := page[1].([]any)
		for _, k := range found {
			if k, ok := k.(string); ok && k != "" {
				keys = append(keys, k)
			}
		}
		if cursor = next; cursor == "0" || cursor == "" {
			break
		}
	}
	deleted := 0
	var failed []string
	for _, k := range keys {
		n, err := c.call("DEL", k)
		if err != nil {
			return deleted, fmt.Errorf("DEL %s: %w", k, err)
		}
		if n, _ := n.(int64); n > 0 {
			deleted++
		} else {
			failed = append(failed, k)
		}
	}
	if len(failed) > 0 {
		return deleted, fmt.Errorf("%d keys were not deleted: %v", len(failed), failed)
	}
	return deleted, nil
}

// Wait pings the Redis every retry until it answers or ctx ends, logging a failure at most once per
// logEvery, so that a head does not start without its Redis.
func (r Redis) Wait(ctx context.Context, retry, logEvery time.Duration, logf func(string, ...any)) error {
	var logged time.Time
	for {
		err := r.Ping(ctx)
		if err == nil {
			return nil
		}
		if logged.IsZero() || time.Since(logged) >= logEvery {
			logf("cannot reach Redis at %s (%v); retrying", r.Address, err)
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(retry):
		}
	}
}
