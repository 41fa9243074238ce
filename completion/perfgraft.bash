# bash completion for perfgraft(1)                             -*- shell-script -*-
# Commands, each command's options (read from 'perfgraft CMD --help', so
# they follow the binary in use), option values, and file arguments.

_perfgraft()
{
    local cur prev words cword
    if declare -F _init_completion >/dev/null 2>&1; then
        _init_completion -n = || return
    else
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD-1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi

    local pg=${words[0]} cmd="" i
    local commands="dump elf inject gperf symbolize perf-map xray help version"
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
            -*) ;;
            *) cmd=${words[i]}; break ;;
        esac
    done

    if [[ -z $cmd ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "-V --version -h --help" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$commands" -- "$cur"))
        fi
        return
    fi
    if [[ $cmd == help ]]; then
        [[ $cword -eq $((i + 1)) ]] &&
            COMPREPLY=($(compgen -W "${commands% help version}" -- "$cur"))
        return
    fi

    # --opt=value
    local opt=$prev
    if [[ $cur == --*=* ]]; then
        opt=${cur%%=*}
        cur=${cur#*=}
    fi
    case $opt in
        --format) COMPREPLY=($(compgen -W "text json" -- "$cur")); return ;;
        --layout) COMPREPLY=($(compgen -W "memory packed per-function" -- "$cur")); return ;;
        --cfi-layout) COMPREPLY=($(compgen -W "standard perf-5.19" -- "$cur")); return ;;
        --compress-debug-sections) COMPREPLY=($(compgen -W "zlib none" -- "$cur")); return ;;
        --jitdump-dir|--image-dir|--buildid-dir|--root)
            COMPREPLY=($(compgen -d -- "$cur")); return ;;
        -o|--output)
            if [[ $cmd == elf ]]; then
                COMPREPLY=($(compgen -d -- "$cur")); return
            fi
            COMPREPLY=($(compgen -f -- "$cur")); return ;;
        -i|--input|--jitdump|-b|--binary|-m|--instr-map)
            COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --pid|--set-pid|--comm|--map|--max-samples|--prefix|--pack-limit|--time|-F|--frequency|-z|--compression-level|--max-gap|--thin-after|--live-wait|--live-hold)
            return ;;
    esac
    if [[ $cur == -* ]]; then
        local opts
        opts=$("$pg" "$cmd" --help 2>/dev/null |
            grep -oE '(^|[ [,|])--?[A-Za-z][A-Za-z0-9.-]*' | sed 's/^[ [,|]//' | sort -u)
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        return
    fi
    if declare -F _filedir >/dev/null 2>&1; then
        _filedir
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
} &&
    complete -F _perfgraft perfgraft
