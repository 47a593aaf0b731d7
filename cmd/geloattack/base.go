package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// runFunc runs a command once its flags are parsed; args are the words after the flags.
type runFunc func(ctx context.Context, args []string) error

// Command is one command of geloattack, in the manner of cmd/go's base.Command: a leaf has flags
// and a function that runs it, a group (store, protocol, model) has subcommands. Help pages are
// generated from these fields and the flags; parsing, the help flag and the refusal of stray
// arguments happen once, in run.
type Command struct {
	// Name is the word that selects the command under its parent.
	Name string
	// UsageLine is what follows the command's full name in its usage line ("[flags] RUN_DIR").
	UsageLine string
	// Short is the one-line summary shown in the parent's list.
	Short string
	// Long is the description printed between the usage line and the flags.
	Long string
	// Flags defines the command's flags on fs and returns what runs the command once they are
	// parsed. Nil for a group.
	Flags func(fs *flag.FlagSet) runFunc
	// Args says the command takes words after its flags; without it any such word is refused
	// (the usual cause is a flag typed after a word, where the flag package stops parsing).
	Args bool
	// Delegate, when set, may select from the raw arguments another command that parses them,
	// unchanged, with its own flags (baseline -attack content is recover's flags and run); nil
	// keeps this command.
	Delegate func(args []string) *Command
	// Commands are a group's subcommands, in the order the help lists them.
	Commands []*Command
	// SavesOnInterrupt says the command saves its work when its context is cancelled (a
	// checkpoint) and says how to continue: it is given the time it needs after the first signal.
	// Any other command is ended shortly after it.
	SavesOnInterrupt bool
}

// lookup finds the command that args select below c (c itself when they select none).
func (c *Command) lookup(args []string) *Command {
	for len(args) > 0 && c.Commands != nil {
		next := (*Command)(nil)
		for _, s := range c.Commands {
			if s.Name == args[0] {
				next = s
			}
		}
		if next == nil {
			break
		}
		c, args = next, args[1:]
	}
	if c.Delegate != nil {
		if to := c.Delegate(args); to != nil {
			return to
		}
	}
	return c
}

// usageError is a command line that names no command (or an unknown one): main exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// run runs c, the command at path (its full name, "geloattack store synth"), on args; help and
// usage go to out.
func (c *Command) run(ctx context.Context, path string, args []string, out io.Writer) error {
	if c.Delegate != nil {
		if to := c.Delegate(args); to != nil {
			return to.run(ctx, parentOf(path)+" "+to.Name, args, out)
		}
	}
	if c.Flags == nil {
		return c.runGroup(ctx, path, args, out)
	}
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned, help is printed below
	fn := c.Flags(fs)
	words, err := parseInterspersed(fs, args, c.Args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.usage(out, path, fs)
			return err
		}
		return fmt.Errorf("%w (see %s -h)", err, path)
	}
	if !c.Args && len(words) > 0 {
		return fmt.Errorf("unexpected argument %q: this command takes only flags (see %s -h)", words[0], path)
	}
	// Before any work: an output file that cannot be written is refused now, not at the end.
	if err := checkOutputFlags(c, fs); err != nil {
		return err
	}
	err = fn(ctx, words)
	var ae *argsError
	if errors.As(err, &ae) {
		c.usage(out, path, fs)
	}
	return err
}

// argsError is a command's refusal of its words (not its flags): run prints the usage with it.
type argsError struct{ msg string }

func (e *argsError) Error() string { return e.msg }

// runGroup selects a subcommand by its name.
func (c *Command) runGroup(ctx context.Context, path string, args []string, out io.Writer) error {
	if len(args) == 0 {
		c.usage(out, path, nil)
		return &usageError{"name a " + c.word(path) + ": " + c.subNames()}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		c.usage(out, path, nil)
		return flag.ErrHelp
	}
	for _, s := range c.Commands {
		if s.Name == args[0] {
			return s.run(ctx, path+" "+s.Name, args[1:], out)
		}
	}
	c.usage(out, path, nil)
	return &usageError{fmt.Sprintf("unknown %s %q; want %s", c.word(path), args[0], c.subNames())}
}

// subNames lists the subcommands' names: "a, b or c".
func (c *Command) subNames() string {
	names := make([]string, len(c.Commands))
	for i, s := range c.Commands {
		names[i] = s.Name
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// usage writes the help page of c: the usage line, the description, and the subcommands or the
// flags (fs; nil for a group).
func (c *Command) usage(w io.Writer, path string, fs *flag.FlagSet) {
	line := c.UsageLine
	if line == "" {
		line = "[flags]"
		if c.Flags == nil {
			line = "<" + c.word(path) + "> [flags]"
		}
	}
	fmt.Fprintf(w, "usage: %s %s\n", path, line)
	if c.Long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(c.Long, "\n"))
	}
	if c.Flags == nil {
		fmt.Fprintf(w, "\n%ss:\n", c.word(path))
		width := 0
		for _, s := range c.Commands {
			width = max(width, len(s.Name))
		}
		for _, s := range c.Commands {
			fmt.Fprintf(w, "  %-*s  %s\n", width, s.Name, s.Short)
		}
		fmt.Fprintf(w, "\nRun '%s <%s> -h' for its flags.\n", path, c.word(path))
		return
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintf(w, "\nflags:\n")
		printFlags(w, fs)
	}
}

// word is what a group calls its members: the top level has commands, a command subcommands.
func (c *Command) word(path string) string {
	if strings.Contains(path, " ") {
		return "subcommand"
	}
	return "command"
}

// parentOf drops the last word of a command path.
func parentOf(path string) string {
	if i := strings.LastIndexByte(path, ' '); i >= 0 {
		return path[:i]
	}
	return path
}

// walk calls f on c and every command below it, with its full name.
func (c *Command) walk(path string, f func(path string, c *Command)) {
	f(path, c)
	for _, s := range c.Commands {
		s.walk(path+" "+s.Name, f)
	}
}

// parseInterspersed parses args into fs and returns the words that are not flags. With
// interspersed set (a command that takes words, such as `eval RUN -batches 2`), flags may follow
// words, as people type them; "--" ends the flags, and every word after it is kept as it is.
// Without it the first word ends the flags (a command of flags only refuses that word).
func parseInterspersed(fs *flag.FlagSet, args []string, interspersed bool) ([]string, error) {
	var words []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if !interspersed || len(rest) == 0 {
			return append(words, rest...), nil
		}
		if i := len(args) - len(rest) - 1; i >= 0 && args[i] == "--" {
			return append(words, rest...), nil
		}
		words = append(words, rest[0])
		args = rest[1:]
	}
}
