package main

import (
	"context"
	"testing"
)

func TestAnUnknownCLIGivesTheUsageWithEveryName(t *testing.T) {
	for _, args := range [][]string{{"nope"}, {}, {"terraform", "tofu"}} {
		err := cli(context.Background(), args)
		want := "usage: harness cli terraform|terraform-1.16|terraform-1.5|tofu|tofu-1.6"
		if err == nil || err.Error() != want {
			t.Errorf("cli %q: error %v, want %q", args, err, want)
		}
	}
}
