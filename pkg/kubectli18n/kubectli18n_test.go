package kubectli18n

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/kubectl/pkg/util/i18n"
)

// A message of kubectl's options command, translated in each of its catalogs.
const message = "Print the list of flags inherited by all commands"

// printEnv makes the test binary print what i18n.T gives for message, and exit.
const printEnv = "KUBECTLI18N_TEST_PRINT"

func TestMain(m *testing.M) {
	if os.Getenv(printEnv) != "" {
		fmt.Printf("%t %s", Hooked, i18n.T(message))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// catalogs is the dir of kubectl's message catalogs in the module this program is built with.
func catalogs(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubectl").Output()
	if err != nil {
		t.Fatalf("finding k8s.io/kubectl's source: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "pkg", "util", "i18n", "translations", "kubectl")
}

func TestTranslatedAreKubectlsCatalogs(t *testing.T) {
	entries, err := os.ReadDir(catalogs(t))
	if err != nil {
		t.Fatal(err)
	}
	var langs []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "default" && e.Name() != "en_US" {
			langs = append(langs, e.Name())
		}
	}
	if !slices.Equal(langs, Translated) {
		t.Fatalf("kubectl has catalogs for %v; Translated lists %v", langs, Translated)
	}
}

// The catalogs left unloaded give every message back unchanged: skipping them changes nothing shown.
func TestTheCatalogsLeftUnloadedChangeNoMessage(t *testing.T) {
	for _, lang := range []string{"default", "en_US"} {
		f, err := os.Open(filepath.Join(catalogs(t), lang, "LC_MESSAGES", "k8s.po"))
		if err != nil {
			t.Fatal(err)
		}
		entries := readPO(t, f)
		f.Close()
		if len(entries) < 100 {
			t.Fatalf("%s: read %d messages, expected kubectl's hundreds", lang, len(entries))
		}
		for _, e := range entries {
			if e["msgid_plural"] != "" {
				t.Errorf("%s: %q has a plural form", lang, e["msgid"])
			}
			if s := e["msgstr"]; s != "" && s != e["msgid"] {
				t.Errorf("%s: %q is given as %q", lang, e["msgid"], s)
			}
		}
	}
}

// readPO reads a gettext .po file's entries as keyword → string (continued strings joined).
func readPO(t *testing.T, f *os.File) []map[string]string {
	t.Helper()
	var entries []map[string]string
	cur, key := map[string]string{}, ""
	flush := func() {
		if cur["msgid"] != "" {
			entries = append(entries, cur)
		}
		cur, key = map[string]string{}, ""
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, `"`):
			cur[key] += unquote(t, line)
		default:
			k, v, ok := strings.Cut(line, " ")
			if !ok {
				t.Fatalf("unexpected line %q", line)
			}
			key = k
			cur[key] = unquote(t, v)
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return entries
}

func unquote(t *testing.T, s string) string {
	t.Helper()
	u, err := strconv.Unquote(s)
	if err != nil {
		t.Fatalf("unquoting %s: %v", s, err)
	}
	return u
}

// What a user sees, by the language of the environment: kubectl's translation where it has one,
// the message as written otherwise.
func TestMessagesByLanguage(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{nil, message},
		{[]string{"LANG=C.UTF-8"}, message},
		{[]string{"LANG=en_US.UTF-8"}, message},
		{[]string{"LANG=en_GB.UTF-8"}, message},
		{[]string{"LANG=de_DE.UTF-8"}, "Schreibt die Liste von Optionen, die alle Befehle erben"},
		{[]string{"LANG=en_US.UTF-8", "LC_ALL=ja_JP.UTF-8"}, "すべてのコマンドに引き継がれるフラグの一覧を表示する"},
		{[]string{"LANG=de_DE"}, message}, // kubectl wants a codeset too
	} {
		cmd := exec.Command(self)
		cmd.Env = append([]string{printEnv + "=1", "PATH=" + os.Getenv("PATH")}, tc.env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		if got := string(out); got != "true "+tc.want {
			t.Errorf("%v: got %q, want %q", tc.env, got, "true "+tc.want)
		}
	}
}

func TestLanguage(t *testing.T) {
	for _, tc := range []struct {
		lcAll, lcMessages, lang, want string
	}{
		{"", "", "", ""},
		{"", "", "C", ""},
		{"", "", "C.UTF-8", "C"},
		{"", "", "fr_FR.UTF-8", "fr_FR"},
		{"", "it_IT.UTF-8", "fr_FR.UTF-8", "it_IT"},
		{"zh_TW.UTF-8", "it_IT.UTF-8", "fr_FR.UTF-8", "zh_TW"},
		{"", "", "pt_BR", ""},
		{"", "", "pt_BR.UTF-8.x", ""},
	} {
		t.Setenv("LC_ALL", tc.lcAll)
		t.Setenv("LC_MESSAGES", tc.lcMessages)
		t.Setenv("LANG", tc.lang)
		if got := Language(); got != tc.want {
			t.Errorf("LC_ALL=%q LC_MESSAGES=%q LANG=%q: got %q, want %q", tc.lcAll, tc.lcMessages, tc.lang, got, tc.want)
		}
	}
}
