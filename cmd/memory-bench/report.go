package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// report is everything the run found, printed as markdown for a README.
type report struct {
	cfg          config
	backend      backend
	server       string
	machine      machine
	seeded       seedResult
	firstStart   time.Duration
	samples      []sample
	peakRSS, rss int64
	rssSplit     string // at the end: anonymous and mapped from files
	rssNote      string
	dbSize       int64
	walSize      int64
}

// machine is what the numbers were measured on.
type machine struct {
	cpu       string
	cpus      int
	platform  string
	goVersion string
}

func describeMachine() machine {
	m := machine{cpu: "unknown CPU", cpus: runtime.NumCPU(), platform: runtime.GOOS + "/" + runtime.GOARCH, goVersion: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

func (r *report) write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "### memory-mcp at %s records, %s markdown files, on %s\n\n", thousands(r.cfg.n), thousands(r.cfg.files), r.backend.title())
	fmt.Fprintf(&b, "Machine: %s, %d CPUs, %s, %s.\n\n", r.machine.cpu, r.machine.cpus, r.machine.platform, r.machine.goVersion)
	fmt.Fprintf(&b, "Seeded %s records (%s) through `memory.Store.Put` in %s, seed %d. ",
		thousands(r.cfg.n), r.kinds(), seconds(r.seeded.took), r.cfg.seed)
	fmt.Fprintf(&b, "Every call is timed at the client, over stdio with the go-sdk client (`mcp.CommandTransport`), one at a time, after up to 3 warm-up calls. ")
	fmt.Fprintf(&b, "Start-up is %d separate processes, each timed from start to the initialize result. Writes use new keys; reads and updates pick random seeded records.\n\n", r.cfg.starts)
	b.WriteString("| operation | count | p50 | p95 | p99 | mean | ops/s | server CPU/call |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|\n")
	var notes []string
	for _, s := range r.samples {
		if len(s.durs) == 0 {
			fmt.Fprintf(&b, "| %s | 0 | – | – | – | – | – | – |\n", s.name)
		} else {
			d := slices.Clone(s.durs)
			slices.Sort(d)
			var sum time.Duration
			for _, x := range d {
				sum += x
			}
			cpu := "–"
			if s.cpu > 0 {
				cpu = ms(s.cpu / time.Duration(len(d)))
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %.0f | %s |\n", s.name, len(d),
				ms(percentile(d, 50)), ms(percentile(d, 95)), ms(percentile(d, 99)), ms(sum/time.Duration(len(d))),
				float64(len(d))/s.wall.Seconds(), cpu)
		}
		if s.note != "" {
			notes = append(notes, s.name+": "+s.note)
		}
	}
	b.WriteString("\n")
	if r.rssNote != "" {
		fmt.Fprintf(&b, "Server peak RSS: not measured (%s). ", r.rssNote)
	} else {
		end := mib(r.rss)
		if r.rssSplit != "" {
			end += ": " + r.rssSplit
		}
		fmt.Fprintf(&b, "Server peak RSS (VmHWM): %s (%s at the end). ", mib(r.peakRSS), end)
	}
	if r.backend.name == "postgres" {
		fmt.Fprintf(&b, "Database: %s (pg_database_size). First start after seeding: %s.\n", mib(r.dbSize), ms(r.firstStart))
	} else {
		fmt.Fprintf(&b, "Database: %s, WAL %s. First start after seeding: %s.\n", mib(r.dbSize), mib(r.walSize), ms(r.firstStart))
	}
	for _, n := range notes {
		fmt.Fprintf(&b, "\n- %s", n)
	}
	if len(notes) > 0 {
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// kinds lists how many seeded records there are of each kind.
func (r *report) kinds() string {
	keys := make([]string, 0, len(r.seeded.byKind))
	for k := range r.seeded.byKind {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return r.seeded.byKind[b] - r.seeded.byKind[a] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %s", thousands(r.seeded.byKind[k]), k)
	}
	return strings.Join(parts, ", ")
}

// percentile is the nearest-rank percentile p of sorted d.
func percentile(d []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(d)))) - 1
	return d[max(0, min(i, len(d)-1))]
}

func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 100:
		return fmt.Sprintf("%.1f ms", v)
	case v < 10000:
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.1f s", v/1000)
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// thousands writes n with thousands separators.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
