# SPDX-License-Identifier: MIT
# rocmmemctl.bash: bash completion for rocmmemctl. Commands, options and table columns are read
# from rocmmemctl's own --help (written from its command table), models and devices from the
# daemon: nothing here has to follow the command line by hand.

# _rocmmemctl_help CMD... prints `rocmmemctl [CMD] --help` of the rocmmemctl being completed.
_rocmmemctl_help()
{
	"${_rocmmemctl_bin:-rocmmemctl}" "$@" --help 2>/dev/null
}

# _rocmmemctl_commands: the names in the "Commands:" section of rocmmemctl --help.
_rocmmemctl_commands()
{
	_rocmmemctl_help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\).*/\1/p'
}

# _rocmmemctl_options CMD: the options of CMD --help (its own and the common ones), long
# names; with "valued", the ones that take a value, short and long names.
_rocmmemctl_options()
{
	if [ "${2:-}" = valued ]; then
		_rocmmemctl_help "$1" |
			sed -n 's/^ \{2,6\}\(-\([A-Za-z]\), \)\{0,1\}\(--[a-z-]*\) [A-Z].*/-\2 \3/p'
	else
		_rocmmemctl_help "$1" | sed -n 's/^ \{2,6\}\(-[A-Za-z], \)\{0,1\}\(--[a-z-]*\).*/\2/p'
	fi
}

# _rocmmemctl_columns CMD [TABLE]: the columns -o takes, of TABLE's section or every one.
_rocmmemctl_columns()
{
	_rocmmemctl_help "$1" |
		sed -n "/^Columns of ${2:-[a-z]*} /,/^\$/s/^  \([A-Z][A-Z]*\) .*/\1/p" | sort -u
}

# _rocmmemctl_query ARGS...: rocmmemctl run against the socket named on the line, if any.
_rocmmemctl_query()
{
	"${_rocmmemctl_bin:-rocmmemctl}" ${_rocmmemctl_socket:+--socket "$_rocmmemctl_socket"} \
		"$@" 2>/dev/null
}

_rocmmemctl()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
	local cmd="" arg="" valued="" i word skip=0
	local _rocmmemctl_bin=${COMP_WORDS[0]} _rocmmemctl_socket=""

	COMPREPLY=()
	# The command is the first word that is no option (only --socket takes a value before
	# it); after it, its own options that take a value are skipped with their value.
	for ((i = 1; i < COMP_CWORD; i++)); do
		word=${COMP_WORDS[i]}
		if ((skip)); then
			skip=0
			continue
		fi
		case $word in
		--socket | -s) skip=1 _rocmmemctl_socket=${COMP_WORDS[i + 1]} ;;
		--socket=*) _rocmmemctl_socket=${word#--socket=} ;;
		-*) [[ " $valued " == *" $word "* ]] && skip=1 ;;
		*)
			if [ -z "$cmd" ]; then
				cmd=$word
				valued=$(_rocmmemctl_options "$cmd" valued | tr '\n' ' ')
			elif [ -z "$arg" ]; then
				arg=$word
			fi
			;;
		esac
	done

	case $prev in
	--socket | -s)
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		return
		;;
	--output | -o)
		# A comma-separated list, perhaps after "+": complete its last name.
		local last=${cur##*[,+]}
		compopt -o nospace 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -P "${cur%"$last"}" \
			-W "$(_rocmmemctl_columns "$cmd" "$arg")" -- "${last^^}")
		return
		;;
	--device | -d)
		mapfile -t COMPREPLY < <(compgen -W \
			"$(_rocmmemctl_query status devices -o DEVICE --noheadings)" -- "$cur")
		return
		;;
	esac
	# The value of another option: nothing to offer.
	[[ -n $cmd && $prev == -* && " $valued " == *" $prev "* ]] && return

	if [ -z "$cmd" ]; then
		if [[ $cur == -* ]]; then
			mapfile -t COMPREPLY < <(compgen -W "--socket --json --help --version" -- "$cur")
		else
			mapfile -t COMPREPLY < <(compgen -W "$(_rocmmemctl_commands)" -- "$cur")
		fi
		return
	fi
	if [[ $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W "$(_rocmmemctl_options "$cmd")" -- "$cur")
		return
	fi
	[ -z "$arg" ] || return
	case $cmd in
	status)
		mapfile -t COMPREPLY < <(compgen -W \
			"devices clients leases models queue denials" -- "$cur")
		;;
	help)
		mapfile -t COMPREPLY < <(compgen -W "$(_rocmmemctl_commands)" -- "$cur")
		;;
	evict | pin | unpin)
		mapfile -t COMPREPLY < <(compgen -W \
			"$(_rocmmemctl_query models -o NAME --noheadings)" -- "$cur")
		;;
	esac
}

complete -F _rocmmemctl rocmmemctl
