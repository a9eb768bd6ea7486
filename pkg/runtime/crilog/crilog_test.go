package crilog

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func readRecords(t *testing.T, path string) []Line {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []Line
	for _, rec := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if rec == "" {
			continue
		}
		ln, err := Parse(rec)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ln)
	}
	return out
}

func TestCopyWritesOneRecordPerLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", MaxLine+10)
	var wg sync.WaitGroup
	for _, s := range []struct{ stream, text string }{{"stdout", "hello\nworld\n" + long + "\nno newline"}, {"stderr", "oops\n"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr, pw := io.Pipe()
			go func() {
				// Dribble bytes in small writes, as a process does.
				for i := 0; i < len(s.text); i += 7 {
					pw.Write([]byte(s.text[i:min(i+7, len(s.text))]))
				}
				pw.Close()
			}()
			if err := f.Copy(s.stream, pr); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	f.Close()
	var stdout, stderr []Line
	for _, ln := range readRecords(t, path) {
		if ln.Time.IsZero() {
			t.Errorf("record without time: %+v", ln)
		}
		if ln.Stream == "stdout" {
			stdout = append(stdout, ln)
		} else {
			stderr = append(stderr, ln)
		}
	}
	if len(stderr) != 1 || stderr[0].Text != "oops" || stderr[0].Partial {
		t.Errorf("stderr records %+v", stderr)
	}
	if len(stdout) != 5 {
		t.Fatalf("%d stdout records, want 5: %+v", len(stdout), stdout)
	}
	if stdout[0].Text != "hello" || stdout[1].Text != "world" || !stdout[2].Partial || stdout[3].Partial ||
		stdout[2].Text+stdout[3].Text != long || stdout[4].Text != "no newline" {
		t.Errorf("stdout records wrong: %q %q p=%v/%v %q", stdout[0].Text, stdout[1].Text, stdout[2].Partial, stdout[3].Partial, stdout[4].Text)
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	if _, err := Parse("garbage"); err == nil {
		t.Error("parsed garbage")
	}
	ln, err := Parse("2024-01-02T03:04:05.123456789Z stdout F ")
	if err != nil || ln.Text != "" || ln.Stream != "stdout" {
		t.Errorf("empty line: %+v %v", ln, err)
	}
}
