package podenv

import "testing"

func TestExpandFollowsKubernetesRules(t *testing.T) {
	vars := map[string]string{"A": "alpha", "B": "beta", "EMPTY": ""}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	for in, want := range map[string]string{
		"plain":           "plain",
		"$(A)":            "alpha",
		"x-$(A)-$(B)-y":   "x-alpha-beta-y",
		"$$(A)":           "$(A)",
		"$$$(A)":          "$alpha",
		"$(UNKNOWN)":      "$(UNKNOWN)",
		"$(EMPTY)x":       "x",
		"$(A":             "$(A",
		"cost $5":         "cost $5",
		"trailing $":      "trailing $",
		"$()":             "$()",
		"$(A)$(A)":        "alphaalpha",
		"nested $(A$(B))": "nested $(A$(B))",
	} {
		if got := Expand(in, lookup); got != want {
			t.Errorf("Expand(%q) = %q, want %q", in, got, want)
		}
	}
}
