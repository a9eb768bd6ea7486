// Package kubectli18n loads kubectl's message catalog only for a language kubectl has translated.
//
// kubectl translates its messages through k8s.io/kubectl/pkg/util/i18n, which loads a catalog on the
// first i18n.T: kubectl's command packages call it in their package variables, so every start of the
// program loaded it, rayctl up's included, though only rayctl kubectl shows those messages. For English,
// and for every language kubectl has no catalog of, the catalog loaded is kubectl's default one, which
// gives each message back as it is: loading it changed no message and cost each start ~20 ms and 4 MB
// of allocations. Imported for its side effect, this package leaves the catalog unloaded then, and loads
// it, as kubectl does, for the languages kubectl translates.
//
// It must initialize before any package that calls i18n.T at initialization: Go initializes, of the
// packages whose imports are all initialized, the first by import path, and this one, importing no
// other package that calls i18n.T, sorts before k8s.io/kubectl's. Hooked says whether it did.
package kubectli18n

import (
	"os"
	"slices"
	"strings"

	"k8s.io/kubectl/pkg/util/i18n"
)

// Translated are the languages (LANGUAGE_TERRITORY) kubectl has catalogs of its own for, besides its
// default and en_US ones, which give every message back unchanged.
var Translated = []string{"de_DE", "fr_FR", "it_IT", "ja_JP", "ko_KR", "pt_BR", "zh_CN", "zh_TW"}

// Hooked is true when this package's loader replaced kubectl's before any message was translated;
// false means kubectl's loader ran first (some package translated a message before this one
// initialized) and the catalog is loaded as kubectl loads it.
var Hooked bool

func init() {
	Hooked = i18n.SetLoadTranslationsFunc(load) == nil
}

// load loads kubectl's catalog for the user's language when kubectl translates it.
func load() error {
	if !slices.Contains(Translated, Language()) {
		return nil
	}
	return i18n.LoadTranslations("kubectl", nil)
}

// Language is the language kubectl reads from the environment: the first of LC_ALL, LC_MESSAGES and
// LANG that is set, as LANGUAGE_TERRITORY.CODESET; its LANGUAGE_TERRITORY, or "" when it has not that
// form (kubectl then uses its default catalog).
func Language() string {
	var v string
	for _, name := range []string{"LC_ALL", "LC_MESSAGES", "LANG"} {
		if v = os.Getenv(name); v != "" {
			break
		}
	}
	lang, _, ok := strings.Cut(v, ".")
	if !ok || strings.Contains(v[len(lang)+1:], ".") {
		return ""
	}
	return lang
}
