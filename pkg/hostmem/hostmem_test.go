package hostmem

import (
	"strings"
	"testing"
)

func TestMeminfoField(t *testing.T) {
	const text = "MemTotal:       16318480 kB\nMemFree:          843256 kB\nMemAvailable:   9437184 kB\n"
	for field, want := range map[string]int64{"MemTotal": 16318480 << 10, "MemAvailable": 9 << 30, "Cached": 0} {
		if got := meminfoField(strings.NewReader(text), field); got != want {
			t.Errorf("%s = %d, want %d", field, got, want)
		}
	}
}

// TestThisMachine: on the machine the tests run on both figures are known, and Available ≤ Total.
func TestThisMachine(t *testing.T) {
	total, avail := Total(), Available()
	if total <= 0 || avail <= 0 || avail > total {
		t.Errorf("Total %d, Available %d", total, avail)
	}
}
