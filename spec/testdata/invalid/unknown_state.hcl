# Invalid: unknown state.
machine "m" {
  initial = state.a
  event "go" {}
  event "back" {}
  guard "ok" {}
  action "act" { cri = ["StartContainer"] }
  duration "wait" {}
  state "a" {
    timeout "back" { after = duration.wait }
    transition "go" {
      guard   = guard.ok
      to      = state.b
      actions = [action.act]
    }
    transition "back" { to = state.bb }
  }
  state "b" { final = true }
}
