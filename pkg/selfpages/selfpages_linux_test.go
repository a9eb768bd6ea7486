package selfpages

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// exeRSSKB sums the resident kB of this process's read-only mappings of its own executable.
func exeRSSKB(t *testing.T) int {
	t.Helper()
	kb, _ := exeMappings(t)
	return kb
}

// exeMappings reads this process's read-only mappings of its own executable: their resident kB, and
// whether every one that Drop advises (those without written copies) is marked to take no huge pages
// (VmFlags nh).
func exeMappings(t *testing.T) (rssKB int, noHuge bool) {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	total, in, written, advised, noHugeMappings := 0, false, false, 0, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			in = len(fields) >= 6 && strings.Join(fields[5:], " ") == exe && !strings.Contains(fields[1], "w")
			written = false
			continue
		}
		if in && len(fields) >= 2 && fields[0] == "Anonymous:" && fields[1] != "0" {
			written = true
		}
		// VmFlags is a mapping's last line.
		if in && !written && len(fields) >= 1 && fields[0] == "VmFlags:" {
			advised++
			if slices.Contains(fields[1:], "nh") {
				noHugeMappings++
			}
		}
		if in && len(fields) >= 2 && fields[0] == "Rss:" {
			kb, _ := strconv.Atoi(fields[1])
			total += kb
		}
	}
	return total, advised > 0 && noHugeMappings == advised
}

// TestDrop drops the test binary's resident code and read-only pages from its RSS, and the
// process runs on (the pages come back from the page cache as it touches them).
func TestDrop(t *testing.T) {
	before := exeRSSKB(t)
	advised, err := Drop()
	if err != nil {
		t.Fatal(err)
	}
	after := exeRSSKB(t)
	t.Logf("binary's read-only mappings: %d kB resident before, %d kB after; %d kB advised", before, after, advised>>10)
	if advised == 0 || after >= before {
		t.Errorf("resident %d kB → %d kB (%d bytes advised), want fewer", before, after, advised)
	}
	// Where the kernel has huge pages, the binary takes none from now on (a touch maps 4 KiB pages, not
	// a whole 2 MiB folio of the page cache).
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage"); err == nil {
		if _, noHuge := exeMappings(t); !noHuge {
			t.Error("the binary's read-only mappings may still take huge pages (no nh in VmFlags)")
		}
	}
	// Code and read-only data not touched since run as before.
	if got := strings.Repeat(strconv.Itoa(42), 2); got != "4242" {
		t.Errorf("got %q", got)
	}
}
