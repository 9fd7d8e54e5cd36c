# Invalid: system blocks naming machines, guards, states, events, actions and
# roles that do not exist.
machine "p" {
  initial = state.a
  event "go" {}
  guard "ok" {}
  action "act" {}
  state "a" {
    transition "go" {
      guard   = guard.ok
      to      = state.b
      actions = [action.act]
    }
    transition "go" { to = state.b }
  }
  state "b" { final = true }
}
machine "c" {
  initial = state.x
  event "poke" {}
  guard "ready" {}
  state "x" {
    transition "poke" {
      guard = guard.ready
      to    = state.y
    }
    transition "poke" { to = state.y }
  }
  state "y" { final = true }
}
replicated "c" {}
tie "pp" "ok" { in = [c.x] }
tie "p" "okay" { in = [c.x] }
tie "c" "ready" {
  in    = [p.aa]
  roles = [role.sidecars]
}
effect "p" "act" {
  sends   = [c.pokes]
  reports = [c.poke]
}
effect "p" "acts" {}
invariant "i" { always_reaches = [p.c] }
external "p" "goo" {}
