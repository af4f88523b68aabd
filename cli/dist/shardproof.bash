# bash completion for shardproof. Commands, subcommands and options come
# from `shardproof help ...` at completion time: always those of the
# installed binary.
_shardproof() {
  local cur=${COMP_WORDS[COMP_CWORD]} words=() w i
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=${COMP_WORDS[i]}
    [[ $w == -* ]] || words+=("$w")
  done
  local help
  help=$("${COMP_WORDS[0]}" help "${words[@]}" 2>/dev/null) || help=$("${COMP_WORDS[0]}" help 2>/dev/null)
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$(grep -oE -- '--[a-z][a-z0-9-]*' <<<"$help" | sort -u)" -- "$cur"))
  else
    local subs
    subs=$(sed -n '/^Subcommands:/,/^$/s/^  \([a-z][a-z-]*\).*/\1/p' <<<"$help")
    if [[ -n $subs ]]; then
      COMPREPLY=($(compgen -W "$subs" -- "$cur"))
    else
      COMPREPLY=($(compgen -f -- "$cur"))
    fi
  fi
}
complete -o default -F _shardproof shardproof
