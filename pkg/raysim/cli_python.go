package raysim

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/gcs"
)

// PythonCommand is the hidden `ray` subcommand the raysim image's python and python3 run. raysim has no
// Python: it answers the one program a control plane runs in a Ray image without Ray's own processes,
// KubeRay's Redis cleanup Job (`python -c "…cleanup_redis_storage(…)…"`), and refuses anything else.
const PythonCommand = "raysim-python"

// cleanupFunction marks the program of KubeRay's Redis cleanup Job (Ray's function it calls).
const cleanupFunction = "cleanup_redis_storage"

// Ray's settings for connecting to Redis, which KubeRay's cleanup Job sets (and their values there).
const (
	envRedisConnectRetries = "RAY_redis_db_connect_retries"
	envRedisConnectWaitMS  = "RAY_redis_db_connect_wait_milliseconds"
	defaultConnectRetries  = 120
	defaultConnectWaitMS   = 500
)

// cmdPython runs `python ARGS…`: `-c PROGRAM` calling cleanup_redis_storage deletes the storage
// namespace's keys from the Redis the environment names (RAY_REDIS_ADDRESS, REDIS_USERNAME,
// REDIS_PASSWORD, RAY_external_storage_namespace), as Ray's function does, and exits 0, or 1 when it
// could not.
func cmdPython(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 || args[0] != "-c" || !strings.Contains(args[1], cleanupFunction) {
		fmt.Fprintln(stderr, "raysim: there is no Python in raysim's image; raysim answers only the `python -c` of KubeRay's Redis cleanup Job "+
			"(a program calling "+cleanupFunction+"). Run Python programs with a Ray image and the host's Ray (docs/raysim.md).")
		return 2
	}
	redis, ok := gcs.RedisFromEnv(os.Getenv)
	if !ok {
		fmt.Fprintln(stderr, "raysim: "+cleanupFunction+": RAY_REDIS_ADDRESS is not set, so there is no Redis to clean up")
		return 1
	}
	tries := envInt(envRedisConnectRetries, defaultConnectRetries)
	wait := time.Duration(envInt(envRedisConnectWaitMS, defaultConnectWaitMS)) * time.Millisecond
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf := func(f string, a ...any) { fmt.Fprintf(stderr, "raysim: "+f+"\n", a...) }
	n, err := redis.DeleteNamespace(ctx, tries, wait, logf)
	if err != nil {
		logf("%s: storage namespace %q: %v", cleanupFunction, redis.Namespace, err)
		return 1
	}
	fmt.Fprintf(stdout, "raysim: deleted %d keys of storage namespace %q (%s…) from Redis at %s\n", n, redis.Namespace, gcs.KeyPrefix(redis.Namespace), redis.Address)
	return 0
}
