(function(){
  function data(article){
    if(!article.__data){article.__data=JSON.parse(article.querySelector('script.doc-data').textContent);}
    return article.__data;
  }
  function plural(n,word){return n+' '+word+(n===1?'':'s');}
  function tip(span){
    var article=span.closest('article.doc'); var d=data(article);
    var side=span.closest('.view').getAttribute('data-side'); var v=d[side]; var k=d.k; var lines=[];
    (span.getAttribute('data-g')||'').split(' ').filter(Boolean).forEach(function(i){
      var g=v.g[+i]; var s=g[0];
      lines.push('\u201c'+g[1]+'\u201d occurs in '+plural(s,'document')+' of the original collection'+
        (s===1?': a search for it singles out its source.':' (fewer than k='+k+'): a search for it narrows the candidates to '+s+'.'));
    });
    var ms=(span.getAttribute('data-m')||'').split(' ').filter(Boolean);
    if(ms.length){
      var cs=(span.getAttribute('data-c')||'').split(' ').filter(Boolean);
      var m=v.m[+ms[0]];
      var first=v.c[+cs[0]];
      var others=first[1].filter(function(j){return j!==+ms[0];}).map(function(j){return '\u201c'+v.m[j]+'\u201d';});
      lines.push('\u201c'+m+'\u201d is common on its own, but belongs to '+plural(cs.length,'listed linkable combination')+
        (others.length?'; e.g. together with '+others.join(' and ')+' it occurs in '+plural(first[0],'document')+' only.':'.'));
    }
    if(span.classList.contains('e-removed')){lines.push('Changed by the protection (see the protected text).');}
    if(span.classList.contains('e-mask')){lines.push('Masked by the protection.');}
    if(span.classList.contains('e-rewrite')){lines.push('Rewritten by the protection (LLM).');}
    return lines.join('\n');
  }
  document.addEventListener('mouseover',function(ev){
    var span=ev.target.closest && ev.target.closest('.text span[data-g],.text span[data-m],.text span.e-removed,.text span.e-mask,.text span.e-rewrite');
    if(span && !span.hasAttribute('title')){span.setAttribute('title',tip(span));}
  });
  document.addEventListener('click',function(ev){
    var button=ev.target.closest && ev.target.closest('button.combo'); if(!button){return;}
    var article=button.closest('article.doc'); var side=button.getAttribute('data-side'); var c=button.getAttribute('data-combo');
    var on=!button.classList.contains('active');
    article.querySelectorAll('button.combo.active').forEach(function(b){b.classList.remove('active');});
    article.querySelectorAll('.sel').forEach(function(s){s.classList.remove('sel');});
    if(!on){return;}
    button.classList.add('active');
    article.querySelectorAll('.view[data-side="'+side+'"] span[data-c]').forEach(function(s){
      if(s.getAttribute('data-c').split(' ').indexOf(c)>=0){s.classList.add('sel');}
    });
  });
})();
