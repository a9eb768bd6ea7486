package runtime

import (
	"slices"
	"testing"
)

// TestArgv: a container's command replaces the image's entrypoint and drops its cmd; its args replace
// the cmd; with neither the image's own run.
func TestArgv(t *testing.T) {
	img := &Image{Entrypoint: []string{"/entry"}, Cmd: []string{"serve", "--port=1"}}
	for _, tc := range []struct {
		command, args, want []string
	}{
		{nil, nil, []string{"/entry", "serve", "--port=1"}},
		{nil, []string{"check"}, []string{"/entry", "check"}},
		{[]string{"sh", "-c"}, nil, []string{"sh", "-c"}},
		{[]string{"sh", "-c"}, []string{"echo hi"}, []string{"sh", "-c", "echo hi"}},
	} {
		if got := img.Argv(tc.command, tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("Argv(%q, %q) = %q, want %q", tc.command, tc.args, got, tc.want)
		}
	}
	got := img.Argv(nil, nil)
	got[0] = "changed"
	if img.Entrypoint[0] != "/entry" {
		t.Error("Argv's result shares the image's slice")
	}
}
