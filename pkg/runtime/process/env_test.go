package process

import (
	"crypto/rand"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/rayctl/rayctl/pkg/runtime"
)

func itoa(n int) string { return strconv.Itoa(n) }

// fmtDigits is a random number, to make a command line unique.
func fmtDigits() string {
	n, _ := rand.Int(rand.Reader, big.NewInt(1_000_000))
	return strconv.FormatInt(n.Int64()+1_000_000, 10)
}

func TestContainersGetNoneOfRayctlsEnvironment(t *testing.T) {
	t.Setenv("RAY_LEAK", "1")
	f := newFixture(t)
	sb := f.pod(t, "env")
	script := `echo "leak=${RAY_LEAK:-none} stats=${RAY_USAGE_STATS_ENABLED:-unset} cpuwarn=${RAY_DISABLE_DOCKER_CPU_WARNING:-unset} foo=$FOO"`
	plain := sh("plain", script)
	plain.Env = []runtime.EnvVar{{Name: "FOO", Value: "bar"}}
	ray := sh("ray", script)
	ray.Image = "rayproject/ray:2.60.0"
	ray.Env = []runtime.EnvVar{{Name: "RAY_USAGE_STATS_ENABLED", Value: "1"}}
	for _, c := range []struct {
		cfg  runtime.ContainerConfig
		want string
	}{
		{plain, "stdout F leak=none stats=unset cpuwarn=unset foo=bar"},
		{ray, "stdout F leak=none stats=1 cpuwarn=1 foo="},
	} {
		id, logPath := f.run(t, f.r, sb, c.cfg)
		waitExited(t, f.r, id)
		waitLog(t, logPath, c.want)
		rec, _ := f.r.load(id)
		for _, kv := range rec.Env {
			name, _, _ := strings.Cut(kv, "=")
			if name != "PATH" && name != "HOME" && name != "HOSTNAME" && name != "FOO" && !strings.HasPrefix(name, "RAY_") {
				t.Errorf("%s: unexpected %s", c.cfg.Name, kv)
			}
		}
	}
}
