package raysim

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
)

// WgetCommand is the hidden `ray` subcommand the raysim image's /bin/wget
// runs. Debian's busybox-static wget crashes when given -T (the timeout
// every KubeRay exec probe passes), so the image carries this small wget
// instead; it understands the options probes and scripts use.
const WgetCommand = "raysim-wget"

// cmdWget fetches one URL: wget [-q] [-O FILE|-] [-T SECONDS] [-t TRIES]
// [--spider] [-U AGENT] [--header 'K: V'] URL. It exits 1 on any failure,
// including an HTTP status other than 2xx, as busybox wget does.
func cmdWget(args []string, stdout, stderr io.Writer) int {
	var (
		quiet, spider, insecure bool
		output                  string
		timeout                 = 15 * time.Minute
		tries                   = 1
		agent                   = "Wget"
		headers                 []string
		urls                    []string
	)
	takesValue := map[string]bool{"O": true, "T": true, "t": true, "U": true, "Y": true, "P": true}
	set := func(name, val string) error {
		switch name {
		case "q", "quiet":
			quiet = true
		case "spider":
			spider = true
		case "no-check-certificate":
			insecure = true
		case "O", "output-document":
			output = val
		case "T", "timeout":
			s, err := strconv.ParseFloat(val, 64)
			if err != nil {
				return fmt.Errorf("invalid timeout %q", val)
			}
			timeout = time.Duration(s * float64(time.Second))
		case "t", "tries":
			n, err := strconv.Atoi(val)
			if err != nil {
				return fmt.Errorf("invalid number of tries %q", val)
			}
			if n > 0 {
				tries = n
			}
		case "U", "user-agent":
			agent = val
		case "header":
			headers = append(headers, val)
		}
		return nil
	}
	longValue := map[string]bool{"output-document": true, "timeout": true, "tries": true, "user-agent": true, "header": true, "proxy": true}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			urls = append(urls, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "--"):
			name, val, has := strings.Cut(a[2:], "=")
			if longValue[name] && !has {
				if i+1 >= len(args) {
					fmt.Fprintf(stderr, "wget: option --%s needs a value\n", name)
					return 1
				}
				i++
				val = args[i]
			}
			if err := set(name, val); err != nil {
				fmt.Fprintln(stderr, "wget:", err)
				return 1
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for j := 1; j < len(a); j++ {
				c := string(a[j])
				if !takesValue[c] {
					_ = set(c, "")
					continue
				}
				val := a[j+1:]
				if val == "" {
					if i+1 >= len(args) {
						fmt.Fprintf(stderr, "wget: option -%s needs a value\n", c)
						return 1
					}
					i++
					val = args[i]
				}
				if err := set(c, val); err != nil {
					fmt.Fprintln(stderr, "wget:", err)
					return 1
				}
				break
			}
		default:
			urls = append(urls, a)
		}
	}
	if len(urls) == 0 {
		fmt.Fprintln(stderr, "usage: wget [-q] [-O FILE] [-T SEC] [-t TRIES] [--spider] [-U AGENT] [--header 'K: V'] URL...")
		return 1
	}
	client := &http.Client{Timeout: timeout}
	if insecure {
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the user asked for it
	}
	for _, u := range urls {
		if !strings.Contains(u, "://") {
			u = "http://" + u
		}
		var err error
		for attempt := 0; attempt < tries; attempt++ {
			if err = fetch(client, u, output, quiet, spider, agent, headers, stdout, stderr); err == nil {
				break
			}
		}
		if err != nil {
			fmt.Fprintln(stderr, "wget:", err)
			return 1
		}
	}
	return 0
}

func fetch(client *http.Client, u, output string, quiet, spider bool, agent string, headers []string, stdout, stderr io.Writer) error {
	method := http.MethodGet
	if spider {
		method = http.MethodHead
	}
	req, err := http.NewRequestWithContext(context.Background(), method, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", agent)
	for _, h := range headers {
		if k, v, ok := strings.Cut(h, ":"); ok {
			req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	if !quiet {
		fmt.Fprintf(stderr, "Connecting to %s\n", req.URL.Host)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("can't connect to remote host: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("server returned error: %s %s", resp.Proto, resp.Status)
	}
	if spider {
		if !quiet {
			fmt.Fprintln(stderr, "remote file exists")
		}
		return nil
	}
	var w io.Writer = stdout
	if output != "-" {
		name := output
		if name == "" {
			name = path.Base(req.URL.Path)
			if name == "/" || name == "." || name == "" {
				name = "index.html"
			}
		}
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
		if !quiet {
			fmt.Fprintf(stderr, "saving to '%s'\n", name)
		}
	} else if !quiet {
		fmt.Fprintln(stderr, "writing to stdout")
	}
	_, err = io.Copy(w, resp.Body)
	return err
}
