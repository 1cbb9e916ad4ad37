//! Unit tests of `rush (the CLI)`.

use super::*;

/// Every argument of every command says what it is for.
#[test]
fn every_argument_is_described() {
    fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for a in cmd.get_arguments() {
            if !a.is_hide_set() && a.get_help().is_none() && a.get_long_help().is_none() {
                let positional = a.get_long().is_none() && a.get_short().is_none();
                if !positional {
                    missing.push(format!("{path} --{}", a.get_id()));
                }
            }
        }
        for sc in cmd.get_subcommands() {
            if sc.get_about().is_none() && sc.get_name() != "help" {
                missing.push(format!("{path} {} (no about)", sc.get_name()));
            }
            walk(sc, &format!("{path} {}", sc.get_name()), missing);
        }
    }
    let mut missing = Vec::new();
    let mut cmd = command();
    cmd.build();
    walk(&cmd, "rush", &mut missing);
    assert!(missing.is_empty(), "no description: {missing:#?}");
    cmd.debug_assert();
}
