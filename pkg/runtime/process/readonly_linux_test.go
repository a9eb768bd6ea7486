package process

import "testing"

func TestUnder(t *testing.T) {
	for _, tc := range []struct {
		p, dir string
		want   bool
	}{{"/dev", "/dev", true}, {"/dev/shm", "/dev", true}, {"/devices", "/dev", false}, {"/a/b", "/a/", true}, {"/", "/tmp", false}} {
		if got := under(tc.p, tc.dir); got != tc.want {
			t.Errorf("under(%q, %q) = %v", tc.p, tc.dir, got)
		}
	}
}
