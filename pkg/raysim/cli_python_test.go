package raysim

import (
	"bytes"
	"net"
	"strings"
	"testing"
)

// TestPythonAnswersOnlyTheRedisCleanup: raysim's python refuses programs it cannot run, and the cleanup
// fails (exit 1, so KubeRay's Job fails) without a Redis address or when the Redis does not answer within
// the retries Ray's settings allow.
func TestPythonAnswersOnlyTheRedisCleanup(t *testing.T) {
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Main(append([]string{PythonCommand}, args...), &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, out := run("script.py"); code != 2 || !strings.Contains(out, "no Python in raysim's image") {
		t.Errorf("python script.py: exit %d, %q", code, out)
	}
	cleanup := "from ray._private.gcs_utils import cleanup_redis_storage; cleanup_redis_storage(...)"
	t.Setenv("RAY_REDIS_ADDRESS", "")
	if code, out := run("-c", cleanup); code != 1 || !strings.Contains(out, "RAY_REDIS_ADDRESS is not set") {
		t.Errorf("without RAY_REDIS_ADDRESS: exit %d, %q", code, out)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := l.Addr().String()
	l.Close()
	t.Setenv("RAY_REDIS_ADDRESS", gone)
	t.Setenv("RAY_external_storage_namespace", "ns")
	t.Setenv("RAY_redis_db_connect_retries", "2")
	t.Setenv("RAY_redis_db_connect_wait_milliseconds", "10")
	if code, out := run("-c", cleanup); code != 1 || !strings.Contains(out, "in 2 attempts") {
		t.Errorf("an absent Redis: exit %d, %q", code, out)
	}
}
