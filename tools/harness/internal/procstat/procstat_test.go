package procstat

import "testing"

func TestParseProcStat(t *testing.T) {
	// A command name with a space and a parenthesis; utime 1234, stime 56,
	// cutime 7, cstime 8.
	stat := "4242 (terraform-provider (k8s) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1234 56 7 8 20 0 12 0 100 2000000 3000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	got, err := Parse([]byte(stat))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Stat{Utime: 1234, Stime: 56, Cutime: 7, Cstime: 8}); got != want {
		t.Fatalf("parseProcStat = %+v, want %+v", got, want)
	}
	if got.Self() != 12.90 || got.Children() != 0.15 {
		t.Errorf("self %v children %v, want 12.90 and 0.15", got.Self(), got.Children())
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 12 13 14 15 16"} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) gave no error", bad)
		}
	}
}

func TestParseVmHWM(t *testing.T) {
	status := "Name:\tterraform-provi\nVmPeak:\t 1300000 kB\nVmHWM:\t   98304 kB\nVmRSS:\t   90000 kB\n"
	got, err := ParseVmHWM([]byte(status))
	if err != nil || got != 98304 {
		t.Fatalf("parseVmHWM = %d, %v; want 98304", got, err)
	}
	if _, err := ParseVmHWM([]byte("Name:\tx\nVmRSS:\t 1 kB\n")); err == nil {
		t.Error("no VmHWM line gave no error")
	}
}

func TestParseMachineTakesTheBusyAndTotalTicksOfEveryCore(t *testing.T) {
	// user 100, nice 1, system 50, idle 800, iowait 9, irq 2, softirq 3,
	// steal 4, guest 7 (inside user), guest_nice 0.
	stat := "cpu  100 1 50 800 9 2 3 4 7 0\ncpu0 50 0 25 400 4 1 1 2 3 0\nintr 1\n"
	got, err := ParseMachine([]byte(stat))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Machine{Busy: 160, Total: 969}); got != want {
		t.Fatalf("ParseMachine = %+v, want %+v", got, want)
	}
	later := Machine{Busy: got.Busy + 150, Total: got.Total + 200}
	if share := got.BusyShare(later); share != 0.75 {
		t.Errorf("busy share %v, want 0.75", share)
	}
	if share := got.BusyShare(got); share != 0 {
		t.Errorf("no time passed: busy share %v, want 0", share)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu  1 2 3\n", "cpu  1 2 x 4 5 6 7 8\n"} {
		if _, err := ParseMachine([]byte(bad)); err == nil {
			t.Errorf("ParseMachine(%q) gave no error", bad)
		}
	}
}
