# Invalid: timer without transition.
machine "m" {
  initial = state.a
  event "go" {}
  event "back" {}
  guard "ok" {}
  action "act" { cri = ["StartContainer"] }
  duration "wait" {}
  state "a" {
    timeout "go" { after = duration.wait }
    transition "back" { to = state.b }
  }
  state "b" {
    transition "go" {
      guard   = guard.ok
      to      = state.c
      actions = [action.act]
    }
    transition "back" { to = state.c }
  }
  state "c" { final = true }
}
