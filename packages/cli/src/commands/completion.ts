/**
 * `completion bash|zsh`: a shell completion script generated from the commander tree, so it always
 * knows every command, subcommand and option. Option values that have a fixed set (`-o`, `--kind`,
 * `--role`, ...) complete too, and `-f` completes file names.
 */
import type { Command, Option } from "commander"
import type { Ctx } from "../context"
import { UsageError } from "../errors"
import { examples, out } from "../kit"

interface Node {
  path: string
  words: { name: string; help: string }[]
}

/** Every command path with the words that may follow it (subcommands, then options). */
export function commandTree(program: Command): { nodes: Node[]; choices: Map<string, string[]> } {
  const nodes: Node[] = []
  const choices = new Map<string, string[]>()
  const optionWords = (options: readonly Option[]) =>
    options.flatMap((o) => {
      if (o.argChoices) for (const flag of [o.short, o.long]) if (flag) choices.set(flag, o.argChoices)
      return [o.long, o.short].filter((f): f is string => !!f).map((name) => ({ name, help: o.description }))
    })
  const globals = optionWords(program.options)
  const walk = (cmd: Command, path: string) => {
    const subs = cmd.commands.filter((c) => c.name() !== "help")
    nodes.push({
      path,
      words: [
        ...subs.map((c) => ({ name: c.name(), help: c.description() })),
        ...optionWords(cmd.options),
        ...(path ? globals : []),
        { name: "--help", help: "show help" },
      ],
    })
    for (const sub of subs) walk(sub, path ? `${path} ${sub.name()}` : sub.name())
  }
  walk(program, "")
  return { nodes, choices }
}

const quote = (text: string) => `'${text.replace(/'/g, "'\\''")}'`

export function bashScript(program: Command): string {
  const { nodes, choices } = commandTree(program)
  const cases = nodes
    .map((n) => `    ${quote(n.path)}) echo ${quote(n.words.map((w) => w.name).join(" "))} ;;`)
    .join("\n")
  const values = [...choices]
    .map(
      ([flag, list]) =>
        `    ${flag}) COMPREPLY=($(compgen -W ${quote(list.join(" "))} -- "$cur")); return ;;`,
    )
    .join("\n")
  return `# swarmplane bash completion. Load it with:  source <(swarmplane completion bash)
_swarmplane_words() {
  case "$1" in
${cases}
  esac
}
_swarmplane() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}" path="" next i w
  case "$prev" in
${values}
    -f|--file) COMPREPLY=($(compgen -f -- "$cur")); return ;;
  esac
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    [[ "$w" == -* ]] && continue
    next="\${path:+$path }$w"
    [[ -n "$(_swarmplane_words "$next")" ]] && path="$next"
  done
  COMPREPLY=($(compgen -W "$(_swarmplane_words "$path")" -- "$cur"))
}
complete -o default -F _swarmplane swarmplane
`
}

export function zshScript(program: Command): string {
  const { nodes, choices } = commandTree(program)
  const item = (w: { name: string; help: string }) => quote(`${w.name.replace(/:/g, "\\:")}:${w.help}`)
  const cases = nodes.map((n) => `    ${quote(n.path)}) reply=(${n.words.map(item).join(" ")}) ;;`).join("\n")
  const values = [...choices]
    .map(([flag, list]) => `    ${flag}) compadd -- ${list.join(" ")}; return ;;`)
    .join("\n")
  return `#compdef swarmplane
# swarmplane zsh completion. Load it with:  source <(swarmplane completion zsh)
# (or save it as _swarmplane in a folder of your $fpath)
_swarmplane_words() {
  reply=()
  case "$1" in
${cases}
  esac
}
_swarmplane() {
  local p="" next w i
  local -a reply
  case "\${words[CURRENT-1]}" in
${values}
    -f|--file) _files; return ;;
  esac
  for (( i = 2; i < CURRENT; i++ )); do
    w="\${words[i]}"
    [[ "$w" == -* ]] && continue
    next="\${p:+$p }$w"
    _swarmplane_words "$next"
    (( \${#reply} )) && p="$next"
  done
  _swarmplane_words "$p"
  _describe -t commands 'swarmplane' reply
}
if [[ "\${funcstack[1]}" == "_swarmplane" ]]; then _swarmplane "$@"; else compdef _swarmplane swarmplane; fi
`
}

export function completionCommand(program: Command, ctx: Ctx): void {
  examples(
    program
      .command("completion")
      .description("print a shell completion script (bash or zsh)")
      .argument("<shell>", "bash or zsh"),
    [
      "source <(swarmplane completion bash)       # in ~/.bashrc",
      "source <(swarmplane completion zsh)        # in ~/.zshrc",
    ],
  ).action((shell: string) => {
    if (shell === "bash") return out(ctx, bashScript(program))
    if (shell === "zsh") return out(ctx, zshScript(program))
    throw new UsageError(
      `no completion for shell "${shell}"`,
      "use swarmplane completion bash or swarmplane completion zsh",
    )
  })
}
