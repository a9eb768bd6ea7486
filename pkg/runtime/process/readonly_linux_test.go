package process

import "testing"

func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/tab\011x`: "/tab\tx", `/back\134slash`: `/back\slash`, `/odd\04`: `/odd\04`, "/plain": "/plain"} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}

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
