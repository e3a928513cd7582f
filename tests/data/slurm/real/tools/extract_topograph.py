# SPDX-License-Identifier: MIT
"""Cut the Slurm topology texts out of a git checkout of NVIDIA/topograph: Go raw strings and
strings.Join literals, Markdown fenced blocks and whole .conf/.yaml files that hold a
SwitchName=/BlockName= line or a topology.yaml list. Usage: extract_topograph.py GITDIR OUTDIR;
prints file, path, line, commit (tab-separated) per text written."""
import json
import os
import re
import subprocess
import sys
repo=sys.argv[1]; out=sys.argv[2]; os.makedirs(out,exist_ok=True)
files=subprocess.run(['git','-C',repo,'grep','-lE','SwitchName=|BlockName=|block_sizes|switches:|blocks:','HEAD','--','*.go','*.md','*.conf','*.yaml'],capture_output=True,text=True).stdout.split()
commit=subprocess.run(['git','-C',repo,'rev-parse','HEAD'],capture_output=True,text=True).stdout.strip()
seen={}
idx=[]
for f in files:
    path=f.split(':',1)[1]
    txt=subprocess.run(['git','-C',repo,'show',f],capture_output=True,text=True).stdout
    cands=[]
    if path.endswith('.go'):
        for m in re.finditer(r'`([^`]*)`',txt,re.S): cands.append((txt[:m.start()].count('\n')+1,m.group(1)))
        # strings.Join([]string{ "..", ..}, "\n")
        for m in re.finditer(r'strings\.Join\(\[\]string\{(.*?)\},\s*"\\n"\)',txt,re.S):
            parts=re.findall(r'"((?:[^"\\]|\\.)*)"',m.group(1))
            cands.append((txt[:m.start()].count('\n')+1,'\n'.join(json.loads('"'+p+'"') for p in parts)))
    elif path.endswith('.md'):
        for m in re.finditer(r'```[a-z]*\n(.*?)```',txt,re.S): cands.append((txt[:m.start()].count('\n')+1,m.group(1)))
    else:
        cands.append((1,txt))
    for line,c in cands:
        conf = re.search(r'^\s*(SwitchName|BlockName)=',c,re.M)
        yml = re.search(r'^\s*-?\s*topology:|^\s*cluster_default:',c,re.M) and re.search(r'(block|tree):',c)
        if not (conf or yml): continue
        if c in seen: continue
        kind='conf' if conf else 'yaml'
        base=re.sub(r'[^A-Za-z0-9]+','-',path).strip('-')
        fn=f"{base}-L{line}.{kind}"
        seen[c]=fn
        open(os.path.join(out,fn),'w').write(c if c.endswith('\n') else c+'\n')
        idx.append((fn,path,line))
for fn,p,l in idx: print(fn,p,l,commit,sep='\t')
