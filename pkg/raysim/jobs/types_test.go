package jobs

import "testing"

// TestReportedRayVersion: /api/version's ray_version is the Ray raysim speaks with raysim's own version
// as a PEP 440 local label, whatever the build called itself.
func TestReportedRayVersion(t *testing.T) {
	for v, want := range map[string]string{
		"0.1.0":          "2.60.0+raysim.0.1.0",
		"9c7cb63-dirty":  "2.60.0+raysim.9c7cb63.dirty",
		"v1.2.3-4-gabc_": "2.60.0+raysim.v1.2.3.4.gabc",
		"":               "2.60.0+raysim",
		"--":             "2.60.0+raysim",
	} {
		if got := ReportedRayVersion(v); got != want {
			t.Errorf("ReportedRayVersion(%q) = %q, want %q", v, got, want)
		}
	}
}
