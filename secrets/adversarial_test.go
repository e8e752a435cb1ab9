package secrets

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// adversarialInputs returns 1 MiB inputs built by repeating each rule
// keyword, alone and with what its pattern wants next (a separator, a token
// body, userinfo), so that every position is a hit and every hit runs the
// rule's regexp as far as its span allows.
func adversarialInputs() map[string]string {
	const size = 1 << 20
	fill := func(unit string) string {
		return strings.Repeat(unit, size/len(unit)+1)[:size]
	}
	var kws []string
	for _, r := range rules {
		kws = append(kws, r.keywords...)
	}
	slices.Sort(kws)
	kws = slices.Compact(kws)
	body := "Zq7Xw2Lm9Np4Ab8Cd3Ef6Gh1Jk5Mn0Pq"
	out := map[string]string{}
	for _, kw := range kws {
		out["kw/"+kw] = fill(kw)
		out["kw=/"+kw] = fill(kw + "=")
		out["kw-body/"+kw] = fill(kw + body)
		out["kw-body-space/"+kw] = fill(kw + body + " ")
		out["kw-sep-quote/"+kw] = fill(kw + `": "` + body)
	}
	out["userinfo"] = fill("://a:")
	out["userinfo-at"] = fill("a://b:c@")
	out["pem"] = fill("-----BEGIN PRIVATE KEY-----\n" + body)
	out["hex"] = fill("0123456789abcdef")
	out["base64"] = fill(body + "+/")
	out["letters"] = fill("a")
	out["dsn"] = fill("u:p@tcp(h)/d ")
	out["jwt"] = fill("eyJ" + body + ".")
	out["twilio"] = fill("AC" + strings.Repeat("0123456789abcdef", 2) + " ")
	return out
}

// TestAdversarialCompletes scans 1 MiB of each keyword, proving each scan
// finishes (under -timeout) and that a keyword alone is not a secret.
// How fast is for BenchmarkScanAdversarial to say.
func TestAdversarialCompletes(t *testing.T) {
	if testing.Short() {
		t.Skip("scans hundreds of megabytes")
	}
	for name, in := range adversarialInputs() {
		if !strings.HasPrefix(name, "kw/") {
			continue // the benchmark covers the rest
		}
		if f, ok := Scan(in); ok {
			t.Errorf("%s: 1 MiB of one keyword flagged by %s", name, f.Rule)
		}
	}
}

// BenchmarkScanAdversarial scans each 1 MiB adversarial input once per
// iteration and reports the slowest: worst-keyword-ms over inputs of one
// keyword repeated, worst-ms over all of them.
func BenchmarkScanAdversarial(b *testing.B) {
	inputs := adversarialInputs()
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range inputs {
			if !yield(k) {
				return
			}
		}
	})
	var worst, worstKw time.Duration
	worstName, worstKwName := "", ""
	for b.Loop() {
		for _, name := range names {
			start := time.Now()
			Scan(inputs[name])
			d := time.Since(start)
			if d > worst {
				worst, worstName = d, name
			}
			if strings.HasPrefix(name, "kw/") && d > worstKw {
				worstKw, worstKwName = d, name
			}
		}
	}
	b.ReportMetric(float64(worstKw.Microseconds())/1000, "worst-keyword-ms")
	b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
	b.Logf("slowest 1 MiB of one keyword: %s (%v); slowest of all: %s (%v)", worstKwName, worstKw, worstName, worst)
}

// BenchmarkScan64KiB is a 64 KiB memory body of ordinary text, code and
// configuration: the largest body a write carries.
func BenchmarkScan64KiB(b *testing.B) {
	var sb strings.Builder
	for _, s := range ordinaryText(b) {
		sb.WriteString(s)
		sb.WriteString("\n")
		if sb.Len() >= 64<<10 {
			break
		}
	}
	in := sb.String()[:64<<10]
	if f, ok := Scan(in); ok {
		b.Fatalf("ordinary body flagged by %s", f.Rule)
	}
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		Scan(in)
	}
}
