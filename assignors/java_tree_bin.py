"""The red-black balancing of ``java.util.HashMap.TreeNode`` (JDK 17), shared by the two replays of
``HashMap``'s walk (:mod:`assignors.java_order`, insertions only, and
:mod:`assignors.streams.java_hash`, with removals).

A crowded bucket's walk follows its tree nodes' ``next`` links, which the tree code reorders as it
rotates, so the rotations must be Java's, step for step: these are ``rotateLeft``,
``rotateRight``, ``balanceInsertion`` and ``balanceDeletion``, on any node with ``parent``,
``left``, ``right`` and ``red``; each returns the (new) root. :func:`insert` is the descent and
link that ``treeify`` and ``putTreeVal`` share before they balance.
"""

from __future__ import annotations

from typing import Callable, Protocol


class _TreeNode(Protocol):
    parent: "_TreeNode | None"
    left: "_TreeNode | None"
    right: "_TreeNode | None"
    red: bool


def insert(root: "_TreeNode", node: "_TreeNode", goes_left: Callable[["_TreeNode"], bool]) -> "_TreeNode":
    """Link ``node`` below ``root`` where Java's descent puts it (``goes_left(parent)``: by hash,
    then ``compareTo``) and return its parent; the caller balances (and, for ``putTreeVal``,
    threads the node into the bucket's list right after that parent)."""
    parent = root
    while True:
        left = goes_left(parent)
        child = parent.left if left else parent.right
        if child is None:
            node.parent = parent
            if left:
                parent.left = node
            else:
                parent.right = node
            return parent
        parent = child


def rotate_left(root: "_TreeNode", p: "_TreeNode | None") -> "_TreeNode":
    if p is not None and p.right is not None:
        r = p.right
        rl = p.right = r.left
        if rl is not None:
            rl.parent = p
        pp = r.parent = p.parent
        if pp is None:
            root = r
            r.red = False
        elif pp.left is p:
            pp.left = r
        else:
            pp.right = r
        r.left = p
        p.parent = r
    return root


def rotate_right(root: "_TreeNode", p: "_TreeNode | None") -> "_TreeNode":
    if p is not None and p.left is not None:
        l = p.left  # noqa: E741 (Java's name)
        lr = p.left = l.right
        if lr is not None:
            lr.parent = p
        pp = l.parent = p.parent
        if pp is None:
            root = l
            l.red = False
        elif pp.right is p:
            pp.right = l
        else:
            pp.left = l
        l.right = p
        p.parent = l
    return root


def balance_insertion(root: "_TreeNode", x: "_TreeNode") -> "_TreeNode":
    x.red = True
    while True:
        xp = x.parent
        if xp is None:
            x.red = False
            return x
        xpp = xp.parent
        if not xp.red or xpp is None:
            return root
        xppl = xpp.left
        if xp is xppl:
            xppr = xpp.right
            if xppr is not None and xppr.red:
                xppr.red = False
                xp.red = False
                xpp.red = True
                x = xpp
            else:
                if x is xp.right:
                    x = xp
                    root = rotate_left(root, x)
                    xp = x.parent
                    xpp = None if xp is None else xp.parent
                if xp is not None:
                    xp.red = False
                    if xpp is not None:
                        xpp.red = True
                        root = rotate_right(root, xpp)
        else:
            if xppl is not None and xppl.red:
                xppl.red = False
                xp.red = False
                xpp.red = True
                x = xpp
            else:
                if x is xp.left:
                    x = xp
                    root = rotate_right(root, x)
                    xp = x.parent
                    xpp = None if xp is None else xp.parent
                if xp is not None:
                    xp.red = False
                    if xpp is not None:
                        xpp.red = True
                        root = rotate_left(root, xpp)


def _is_red(n: "_TreeNode | None") -> bool:
    return n is not None and n.red


def balance_deletion(root: "_TreeNode", x: "_TreeNode | None") -> "_TreeNode":
    while True:
        if x is None or x is root:
            return root
        xp = x.parent
        if xp is None:
            x.red = False
            return x
        if x.red:
            x.red = False
            return root
        xpl = xp.left
        if xpl is x:
            xpr = xp.right
            if xpr is not None and xpr.red:
                xpr.red = False
                xp.red = True
                root = rotate_left(root, xp)
                xp = x.parent
                xpr = None if xp is None else xp.right
            if xpr is None:
                x = xp
            else:
                sl, sr = xpr.left, xpr.right
                if not _is_red(sr) and not _is_red(sl):
                    xpr.red = True
                    x = xp
                else:
                    if not _is_red(sr):
                        if sl is not None:
                            sl.red = False
                        xpr.red = True
                        root = rotate_right(root, xpr)
                        xp = x.parent
                        xpr = None if xp is None else xp.right
                    if xpr is not None:
                        xpr.red = False if xp is None else xp.red
                        sr = xpr.right
                        if sr is not None:
                            sr.red = False
                    if xp is not None:
                        xp.red = False
                        root = rotate_left(root, xp)
                    x = root
        else:
            if xpl is not None and xpl.red:
                xpl.red = False
                xp.red = True
                root = rotate_right(root, xp)
                xp = x.parent
                xpl = None if xp is None else xp.left
            if xpl is None:
                x = xp
            else:
                sl, sr = xpl.left, xpl.right
                if not _is_red(sl) and not _is_red(sr):
                    xpl.red = True
                    x = xp
                else:
                    if not _is_red(sl):
                        if sr is not None:
                            sr.red = False
                        xpl.red = True
                        root = rotate_left(root, xpl)
                        xp = x.parent
                        xpl = None if xp is None else xp.left
                    if xpl is not None:
                        xpl.red = False if xp is None else xp.red
                        sl = xpl.left
                        if sl is not None:
                            sl.red = False
                    if xp is not None:
                        xp.red = False
                        root = rotate_right(root, xp)
                    x = root
