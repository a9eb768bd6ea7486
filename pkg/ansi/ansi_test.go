package ansi

import "testing"

func TestPaint(t *testing.T) {
	if got := Paint(false, Red, "x"); got != "x" {
		t.Errorf("off: %q", got)
	}
	if got := Paint(true, Bold+Green, "ok"); got != "\x1b[1m\x1b[32mok\x1b[0m" {
		t.Errorf("on: %q", got)
	}
}
