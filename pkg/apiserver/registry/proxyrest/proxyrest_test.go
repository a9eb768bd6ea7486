package proxyrest

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestSplitID(t *testing.T) {
	for _, tc := range []struct {
		id, scheme, name, port string
		bad                    bool
	}{
		{id: "web", name: "web"},
		{id: "web:8265", name: "web", port: "8265"},
		{id: "web:dashboard", name: "web", port: "dashboard"},
		{id: "https:web:8443", scheme: "https", name: "web", port: "8443"},
		{id: "ftp:web:21", bad: true},
		{id: "a:b:c:d", bad: true},
		{id: ":8265", bad: true},
	} {
		scheme, name, port, err := SplitID("service", tc.id)
		if tc.bad {
			if !apierrors.IsBadRequest(err) {
				t.Errorf("SplitID(%q): %v, want a 400", tc.id, err)
			}
			continue
		}
		if err != nil || scheme != tc.scheme || name != tc.name || port != tc.port {
			t.Errorf("SplitID(%q) = %q %q %q %v, want %q %q %q", tc.id, scheme, name, port, err, tc.scheme, tc.name, tc.port)
		}
	}
}

func TestCheckIP(t *testing.T) {
	for ip, ok := range map[string]bool{
		"10.244.0.5": true, "127.0.0.1": true, "fd00::1": true,
		"": false, "0.0.0.0": false, "169.254.169.254": false, "224.0.0.1": false, "nonsense": false,
	} {
		if err := CheckIP(ip); (err == nil) != ok {
			t.Errorf("CheckIP(%q) = %v, want allowed=%v", ip, err, ok)
		}
	}
}
