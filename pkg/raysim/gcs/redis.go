package gcs

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// Redis is the external Redis a head's GCS is pointed at for fault tolerance (Ray's RAY_REDIS_ADDRESS,
// REDIS_USERNAME, REDIS_PASSWORD and RAY_external_storage_namespace). raysim only checks that it
// answers; it keeps the GCS's state in memory, not there.
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

// Ping connects to the Redis, authenticates when a password is set, and sends PING, expecting PONG.
func (r Redis) Ping(ctx context.Context) error {
	addr, user, password, err := r.hostPort()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	rd := bufio.NewReader(conn)
	if password != "" {
		args := []string{"AUTH", password}
		if user != "" {
			args = []string{"AUTH", user, password}
		}
		if err := command(conn, rd, "+OK", args...); err != nil {
			return fmt.Errorf("AUTH: %w", err)
		}
	}
	if err := command(conn, rd, "+PONG", "PING"); err != nil {
		return fmt.Errorf("PING: %w", err)
	}
	return nil
}

// command sends one RESP command (an array of bulk strings) and reads a one-line reply, which must be want.
func command(conn net.Conn, rd *bufio.Reader, want string, args ...string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return err
	}
	line, err := rd.ReadString('\n')
	if err != nil {
		return fmt.Errorf("no answer: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line != want {
		return fmt.Errorf("redis answered %q", line)
	}
	return nil
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
